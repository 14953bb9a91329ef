import { parseArgs } from 'node:util';
import type { Config } from '../../config/config.js';
import type { OpenOptions } from '../../storage/open.js';
import { DuplicateWebhookNameError } from '../../storage/errors.js';
import type { Store } from '../../storage/store.js';
import type { WebhookSubscriptionInfo } from '../../storage/webhook-store.js';
import { subscriptionUrlProblem } from '../../webhooks/address-policy.js';
import { generateEventIdPrefix, generateWebhookSecret } from '../../webhooks/signature.js';
import type { CommandContext } from '../command.js';
import { EXISTING_DATABASE, NEW_OR_EXISTING_DATABASE, withStore as withConfiguredStore } from '../database.js';
import { UsageError } from '../errors.js';

export const usage = `  webhook add --url URL [--name NAME]
                              subscribe URL to new plants; prints the signing secret alone on stdout, once
  webhook list                subscriptions: name, URL, state, created, last success and failure, counts
  webhook remove NAME         delete a subscription and its events
  webhook disable NAME        stop sending to it (new plants are not queued for it meanwhile)
  webhook enable NAME         send to it again, waiting events first
  webhook rotate-secret NAME  print a new signing secret alone on stdout; the old one also signs for
                              WEBHOOK_SECRET_GRACE
  webhook deliveries [NAME] [--failed] [--limit N]
                              recent attempts, newest first: time, subscription, event id, plant id,
                              attempt, status or error
  webhook redeliver EVENT_ID  send that event once more`;

const NAME = /^[A-Za-z0-9._-]{1,64}$/;
const NAME_RULE = '1 to 64 of A-Z a-z 0-9 . _ -';

/** A subscription's default name: its URL's host and port, as a name may spell them. */
function nameFromUrl(url: string): string {
  return new URL(url).host.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64);
}

function when(date: Date | null): string {
  return date ? date.toISOString() : 'never';
}

/** One tab-separated line per subscription; never a secret. */
export function describeSubscription(info: WebhookSubscriptionInfo): string {
  const state = info.disabledAt ? `disabled since ${info.disabledAt.toISOString()}: ${info.disabledReason ?? 'no reason recorded'}` : 'active';
  const failure = info.lastFailureAt ? `${info.lastFailureAt.toISOString()} (${info.lastError ?? 'non-2xx answer'})` : 'never';
  return [
    info.name,
    info.url,
    state,
    `created ${info.createdAt.toISOString()}`,
    `last success ${when(info.lastSuccessAt)}`,
    `last failure ${failure}`,
    `waiting ${info.waiting}`,
    `delivered ${info.delivered}`,
    `retried ${info.retried}`,
    `failed ${info.failed}`,
  ].join('\t');
}

function oneName(rest: string[], action: string): string {
  const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true, strict: true });
  const [name] = positionals;
  if (!name || positionals.length !== 1) throw new UsageError(`webhook ${action} needs exactly one NAME`);
  return name;
}

function noSuch(name: string): void {
  process.stderr.write(`no webhook subscription named "${name}"\n`);
  process.exitCode = 1;
}

/**
 * `plantstore webhook …`: the operator's management of subscriptions, on the same database as the servers. Only
 * `add` may start a new database; every other action works on subscriptions that must already be there.
 */
export async function run(args: string[], context: CommandContext): Promise<void> {
  const [action, ...rest] = args;
  const config: Config = context.config();
  const withStore = <T>(work: (store: Store) => Promise<T>, options: OpenOptions = EXISTING_DATABASE) => withConfiguredStore(config, options, work);
  switch (action) {
    case 'add': {
      const { values } = parseArgs({ args: rest, options: { url: { type: 'string' }, name: { type: 'string' } }, strict: true });
      const url = values.url;
      if (!url) throw new UsageError('webhook add needs --url URL');
      const problem = subscriptionUrlProblem(url, config.webhooks.allowPrivateNetworks);
      if (problem) throw new UsageError(`webhook add: ${problem}`);
      const name = values.name ?? nameFromUrl(url);
      if (!NAME.test(name)) throw new UsageError(`webhook add --name must be ${NAME_RULE}`);
      const secret = generateWebhookSecret();
      try {
        await withStore(
          (store) => store.webhookSubscriptions.add({ name, url, secret, idPrefix: generateEventIdPrefix(), createdAt: new Date() }),
          NEW_OR_EXISTING_DATABASE,
        );
      } catch (error) {
        if (!(error instanceof DuplicateWebhookNameError)) throw error;
        const hint = values.name === undefined ? " (the name was taken from the URL's host; choose another with --name NAME)" : '';
        process.stderr.write(`plantstore: ${error.message}${hint}\n`);
        process.exitCode = 1;
        return;
      }
      process.stdout.write(`${secret}\n`);
      process.stderr.write(
        `added webhook subscription "${name}" for ${url}; running servers start sending to it within about a second.\n` +
          'Its signing secret (above) is shown only this once: store it now.\n',
      );
      return;
    }
    case 'list': {
      parseArgs({ args: rest, options: {}, strict: true });
      const subscriptions = await withStore((store) => store.webhookSubscriptions.list());
      if (subscriptions.length === 0) process.stderr.write('no webhook subscriptions; add one with: plantstore webhook add --url URL\n');
      for (const info of subscriptions) process.stdout.write(`${describeSubscription(info)}\n`);
      return;
    }
    case 'remove': {
      const name = oneName(rest, action);
      if (!(await withStore((store) => store.webhookSubscriptions.remove(name)))) return noSuch(name);
      process.stderr.write(`removed webhook subscription "${name}" and its events\n`);
      return;
    }
    case 'disable':
    case 'enable': {
      const name = oneName(rest, action);
      const enabled = action === 'enable';
      if (!(await withStore((store) => store.webhookSubscriptions.setEnabled(name, enabled, 'disabled by the operator')))) return noSuch(name);
      process.stderr.write(`${enabled ? 'enabled' : 'disabled'} webhook subscription "${name}"; running servers follow within about a second\n`);
      return;
    }
    case 'rotate-secret': {
      const name = oneName(rest, action);
      const secret = generateWebhookSecret();
      if (!(await withStore((store) => store.webhookSubscriptions.rotateSecret(name, secret, config.webhooks.secretGraceMs)))) return noSuch(name);
      process.stdout.write(`${secret}\n`);
      process.stderr.write(
        `rotated the signing secret of "${name}"; it is shown only this once. Deliveries carry signatures by both the new ` +
          `and the previous secret for ${Math.round(config.webhooks.secretGraceMs / 1000)} s (WEBHOOK_SECRET_GRACE).\n`,
      );
      return;
    }
    case 'deliveries': {
      const { values, positionals } = parseArgs({
        args: rest,
        options: { failed: { type: 'boolean' }, limit: { type: 'string' } },
        allowPositionals: true,
        strict: true,
      });
      if (positionals.length > 1) throw new UsageError('webhook deliveries takes at most one NAME');
      const limit = values.limit ?? '50';
      if (!/^[1-9][0-9]{0,5}$/.test(limit)) throw new UsageError('webhook deliveries --limit needs a positive integer');
      const [name] = positionals;
      const deliveries = await withStore((store) =>
        store.webhookSubscriptions.deliveries({ ...(name === undefined ? {} : { name }), failedOnly: values.failed ?? false, limit: Number(limit) }),
      );
      if (deliveries.length === 0) process.stderr.write('no attempts recorded\n');
      for (const delivery of deliveries) {
        const answer = delivery.status === null ? `error ${delivery.error ?? 'unknown'}` : `status ${delivery.status}`;
        process.stdout.write(
          [delivery.attemptedAt.toISOString(), delivery.subscription, delivery.eventId, `plant ${delivery.plantId}`, `attempt ${delivery.attempt}`, answer].join(
            '\t',
          ) + '\n',
        );
      }
      return;
    }
    case 'redeliver': {
      const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true, strict: true });
      const [eventId] = positionals;
      if (!eventId || positionals.length !== 1) throw new UsageError('webhook redeliver needs exactly one EVENT_ID (as webhook deliveries prints it)');
      const result = await withStore((store) => store.webhookSubscriptions.redeliver(eventId));
      if (result === 'not-found') {
        process.stderr.write(`no webhook event ${JSON.stringify(eventId)} (delivered events are pruned after WEBHOOK_RETENTION)\n`);
        process.exitCode = 1;
        return;
      }
      process.stderr.write(
        result === 'scheduled'
          ? `event ${eventId} will be sent once more within about a second\n`
          : `event ${eventId} will be sent once more when its subscription is enabled again (it is disabled)\n`,
      );
      return;
    }
    default:
      throw new UsageError(`unknown webhook command ${JSON.stringify(action ?? '')}`);
  }
}
