import { Agent, fetch as undiciFetch } from 'undici';

/**
 * The fetch the CLI hands plantstore/client: undici's, on an agent of its own timeouts. A streamed answer (a bulk
 * create's results, the change feed) is silent for as long as the input or the store is: no whole-body timeout.
 */
export function cliFetch(timeouts: { readonly headersTimeout: number; readonly bodyTimeout: number }): typeof fetch {
  const dispatcher = new Agent(timeouts);
  return ((input: string | URL, init?: RequestInit) => undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof fetch;
}
