import http from 'node:http';

/**
 * A streamed bulk create opened on the server at `base` (POST /plants as chunked NDJSON, on a connection of its own):
 * the caller writes the lines, ends the request and reads the result lines from its 'response'.
 */
export function openBulkCreate(base: string, token: string): http.ClientRequest {
  const url = new URL('/plants', base);
  return http.request({
    host: url.hostname,
    port: url.port,
    method: 'POST',
    path: url.pathname,
    agent: false,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson', 'transfer-encoding': 'chunked' },
  });
}
