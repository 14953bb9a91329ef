import { hash } from 'node:crypto';
import { plantJson } from '../json/plant-json.js';
import { isSamePlant } from '../plants/replay.js';
import type { Store } from '../storage/store.js';
import { isSameToken, type TokenRecord } from '../storage/token-store.js';
import { isSameWebhook, type WebhookRecord } from '../storage/webhook-store.js';
import { generateEventIdPrefix } from '../webhooks/signature.js';
import { SetDigest } from './digest.js';
import { PlantCursor, plantPages } from './pages.js';

/** The target holds data the source does not: copying would mix two databases, so nothing is written. */
export class TargetHoldsOtherDataError extends Error {
  constructor(what: string) {
    super(`the target already holds different data: ${what}; copy only into an empty database or one an earlier copy from this source filled`);
    this.name = 'TargetHoldsOtherDataError';
  }
}

/** One kind of data as the copy moves it. */
interface Section {
  /** Plural noun for messages: "plants". */
  readonly name: string;
  /** Throws TargetHoldsOtherDataError when the target holds rows of this kind that the source does not hold identically. */
  checkTarget(): Promise<void>;
  /** Copies every row the target lacks; rows already there identically are left alone. Resolves with the rows created. */
  copy(onRows: (rows: number) => void): Promise<number>;
  /** The fingerprint of one side's rows of this kind. */
  digest(store: Store): Promise<SetDigest>;
}

interface SectionReport {
  readonly name: string;
  readonly created: number;
  readonly source: SetDigest;
  readonly target: SetDigest;
}

export interface CopyReport {
  readonly sections: readonly SectionReport[];
  /** Every section's count and checksum agree on both sides. */
  readonly verified: boolean;
}

export interface CopyOptions {
  /** Most plants committed in one call (WRITE_BATCH_LIMIT). */
  readonly batchSize: number;
  /** Rows created so far, by section, as the copy goes. */
  readonly onProgress?: (section: string, created: number) => void;
}

function canonicalToken(token: TokenRecord): string {
  // Everything isSameToken compares: the last use is carried over (and only ever moves forward), so a token used on
  // the source while the copy runs does not count as a difference.
  return JSON.stringify([token.name, token.hash.toString('hex'), token.scopes, token.createdAt.getTime(), token.expiresAt?.getTime() ?? null]);
}

function canonicalWebhook(subscription: WebhookRecord): string {
  // The secrets only as hashes, so that no canonical row can carry one anywhere. The id prefix is left out: each
  // database gives its own (see webhooksSection).
  const secretHash = (secret: string | null) => (secret === null ? null : hash('sha256', secret, 'hex'));
  const time = (date: Date | null) => date?.getTime() ?? null;
  return JSON.stringify([
    subscription.name,
    subscription.url,
    secretHash(subscription.secret),
    secretHash(subscription.previousSecret),
    time(subscription.previousSecretUntil),
    time(subscription.createdAt),
    time(subscription.disabledAt),
    subscription.disabledReason,
  ]);
}

/**
 * Subscriptions with their secrets, so receivers go on verifying signatures, and their state; their events and
 * deliveries stay behind. Each copy gets a new id prefix: the target numbers its events from its own sequence, so with
 * the source's prefix a new event could carry a webhook-id the receiver already had from the source and be dropped
 * by the receiver as a repeat.
 */
function webhooksSection(source: Store, target: Store): Section {
  return {
    name: 'webhook subscriptions',
    async checkTarget() {
      const ours = new Map((await source.webhookSubscriptions.exportAll()).map((subscription) => [subscription.name, subscription]));
      for (const there of await target.webhookSubscriptions.exportAll()) {
        const here = ours.get(there.name);
        if (!here) throw new TargetHoldsOtherDataError(`webhook subscription "${there.name}", which the source does not hold`);
        if (!isSameWebhook(here, there)) throw new TargetHoldsOtherDataError(`webhook subscription "${there.name}", which differs from the source's`);
      }
    },
    async copy(onRows) {
      // Subscriptions are made by hand, so they are few: one call, one transaction.
      const subscriptions = (await source.webhookSubscriptions.exportAll()).map((subscription) => ({ ...subscription, idPrefix: generateEventIdPrefix() }));
      const outcomes = await target.webhookSubscriptions.importAll(subscriptions);
      let created = 0;
      outcomes.forEach((outcome, index) => {
        if (outcome.kind === 'created') created += 1;
        else if (outcome.kind === 'conflict') {
          throw new TargetHoldsOtherDataError(
            `webhook subscription "${(subscriptions[index] as WebhookRecord).name}", which was written there while the copy ran`,
          );
        }
      });
      onRows(created);
      return created;
    },
    async digest(store) {
      const digest = new SetDigest();
      for (const subscription of await store.webhookSubscriptions.exportAll()) digest.add(canonicalWebhook(subscription));
      return digest;
    },
  };
}

function plantsSection(source: Store, target: Store, batchSize: number): Section {
  return {
    name: 'plants',
    async checkTarget() {
      // The usual target is empty: one query says so. Otherwise both sides are walked side by side in id order.
      if ((await target.plants.list({ limit: 1 })).length === 0) return;
      const ours = new PlantCursor(source.plants);
      const theirs = new PlantCursor(target.plants);
      for (let there = await theirs.current(); there !== undefined; there = await theirs.current()) {
        let here = await ours.current();
        while (here !== undefined && here.id < there.id) {
          ours.advance();
          here = await ours.current();
        }
        if (here === undefined || here.id !== there.id) throw new TargetHoldsOtherDataError(`plant ${there.id}, which the source does not hold`);
        if (!isSamePlant(here, there)) throw new TargetHoldsOtherDataError(`plant ${there.id}, which differs from the source's`);
        theirs.advance();
      }
    },
    async copy(onRows) {
      let created = 0;
      for await (const page of plantPages(source.plants)) {
        for (let start = 0; start < page.length; start += batchSize) {
          const batch = page.slice(start, start + batchSize);
          const outcomes = await target.plants.create(batch);
          outcomes.forEach((outcome, index) => {
            const plant = batch[index] as (typeof batch)[number];
            if (outcome.kind === 'created') created += 1;
            else if (outcome.kind === 'failed') throw outcome.error;
            else if (outcome.kind === 'existing' && !isSamePlant(outcome.stored, plant)) {
              throw new TargetHoldsOtherDataError(`plant ${plant.id}, which was written there with other content while the copy ran`);
            }
          });
          onRows(created);
        }
      }
      return created;
    },
    async digest(store) {
      const digest = new SetDigest();
      for await (const page of plantPages(store.plants)) for (const plant of page) digest.add(plantJson(plant));
      return digest;
    },
  };
}

function tokensSection(source: Store, target: Store): Section {
  return {
    name: 'tokens',
    async checkTarget() {
      const ours = new Map((await source.tokens.exportAll()).map((token) => [token.name, token]));
      for (const there of await target.tokens.exportAll()) {
        const here = ours.get(there.name);
        if (!here) throw new TargetHoldsOtherDataError(`token "${there.name}", which the source does not hold`);
        if (!isSameToken(here, there)) throw new TargetHoldsOtherDataError(`token "${there.name}", which differs from the source's`);
      }
    },
    async copy(onRows) {
      // Tokens are made by hand, so they are few: one call, one transaction.
      const tokens = await source.tokens.exportAll();
      const outcomes = await target.tokens.importAll(tokens);
      let created = 0;
      outcomes.forEach((outcome, index) => {
        if (outcome.kind === 'created') created += 1;
        else if (outcome.kind === 'conflict') {
          throw new TargetHoldsOtherDataError(`token "${(tokens[index] as TokenRecord).name}", which was written there while the copy ran`);
        }
      });
      onRows(created);
      return created;
    },
    async digest(store) {
      const digest = new SetDigest();
      for (const token of await store.tokens.exportAll()) digest.add(canonicalToken(token));
      return digest;
    },
  };
}

/**
 * Copies everything from `source` into `target` (already migrated to the current schema by opening it): plants,
 * tokens (hashes, scopes, expiry and times, so clients keep working as they did) and webhook subscriptions (secrets
 * and state, so receivers keep verifying; not their events or deliveries).
 *
 * First every section checks the target, and if it holds anything the source does not hold identically, nothing is
 * written (TargetHoldsOtherDataError). Then each section copies what the target lacks: rows already there identically
 * are fine, so a copy run again after an interruption finishes the job. Last, both sides are read again and each
 * section's count and order-independent checksum compared: equal unless the source changed while the copy ran (then
 * run it again once writes have stopped).
 */
export async function copyDatabase(source: Store, target: Store, options: CopyOptions): Promise<CopyReport> {
  // Subscriptions last: the target writes an event for every plant it creates while one is active, and the copied
  // plants are not new to receivers.
  const sections: Section[] = [tokensSection(source, target), plantsSection(source, target, options.batchSize), webhooksSection(source, target)];
  for (const section of sections) await section.checkTarget();
  const created = new Map<string, number>();
  for (const section of sections) {
    created.set(section.name, await section.copy((rows) => options.onProgress?.(section.name, rows)));
  }
  const reports: SectionReport[] = [];
  for (const section of sections) {
    const [ours, theirs] = await Promise.all([section.digest(source), section.digest(target)]);
    reports.push({ name: section.name, created: created.get(section.name) ?? 0, source: ours, target: theirs });
  }
  return { sections: reports, verified: reports.every((report) => report.source.equals(report.target)) };
}
