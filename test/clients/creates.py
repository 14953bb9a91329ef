"""Creates from one address as Python programs send them: aiohttp (one ClientSession, its defaults) or requests
(one Session shared by threads, its defaults). CONCURRENCY workers each send their next create as soon as the last
is answered, TOTAL in all; prints the summary test/helpers/client-summary.ts reads, as one JSON line.

    python3 creates.py aiohttp|requests URL TOKEN CONCURRENCY TOTAL FIRST_ID
"""
import json
import sys
import threading
import time


def summarize(outcomes, elapsed_ms):
    statuses, errors, ok = {}, {}, 0
    for status, error, _ in outcomes:
        if error is not None:
            errors[error] = errors.get(error, 0) + 1
        elif 200 <= status < 300:
            ok += 1
        else:
            statuses[str(status)] = statuses.get(str(status), 0) + 1
    times = sorted(ms for _, _, ms in outcomes)

    def quantile(q):
        return times[min(len(times) - 1, int(q * len(times)))] if times else 0

    return {"sent": len(outcomes), "ok": ok, "statuses": statuses, "errors": errors, "elapsedMs": elapsed_ms,
            "p50Ms": quantile(0.5), "p99Ms": quantile(0.99), "maxMs": times[-1] if times else 0}


def body(plant_id):
    return json.dumps({"id": plant_id, "name": f"client {plant_id}"})


def with_aiohttp(base, headers, concurrency, total, first_id):
    import asyncio
    import aiohttp

    outcomes = []
    counter = iter(range(total))

    async def worker(session):
        for index in counter:
            started = time.perf_counter()
            try:
                async with session.post(f"{base}/plants", data=body(first_id + index), headers=headers) as response:
                    await response.read()
                    outcomes.append((response.status, None, (time.perf_counter() - started) * 1000))
            except Exception as error:  # noqa: BLE001 - every failure is counted by its kind
                outcomes.append((0, type(error).__name__, (time.perf_counter() - started) * 1000))

    async def main():
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(worker(session) for _ in range(concurrency)))

    started = time.perf_counter()
    asyncio.run(main())
    return outcomes, (time.perf_counter() - started) * 1000


def with_requests(base, headers, concurrency, total, first_id):
    import requests

    outcomes = []
    lock = threading.Lock()
    counter = iter(range(total))
    session = requests.Session()

    def worker():
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            started = time.perf_counter()
            try:
                response = session.post(f"{base}/plants", data=body(first_id + index), headers=headers, timeout=60)
                outcome = (response.status_code, None, (time.perf_counter() - started) * 1000)
            except Exception as error:  # noqa: BLE001 - every failure is counted by its kind
                outcome = (0, type(error).__name__, (time.perf_counter() - started) * 1000)
            with lock:
                outcomes.append(outcome)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes, (time.perf_counter() - started) * 1000


def main():
    mode, base, token, concurrency, total, first_id = sys.argv[1:7]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    run = with_aiohttp if mode == "aiohttp" else with_requests
    outcomes, elapsed_ms = run(base, headers, int(concurrency), int(total), int(first_id))
    print(json.dumps(summarize(outcomes, elapsed_ms)))


if __name__ == "__main__":
    main()
