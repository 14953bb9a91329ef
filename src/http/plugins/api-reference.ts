import fastifySwagger, { type StaticDocumentSpec } from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import fastifyPlugin from 'fastify-plugin';

/** Where the interactive API reference is served; the OpenAPI document points here (externalDocs). */
export const API_REFERENCE_PATH = '/docs';

/**
 * The Content-Security-Policy of the reference page and of every asset under API_REFERENCE_PATH. Everything the
 * page loads comes from plantstore itself, so the policy says 'self' and names only what Swagger UI needs beyond it:
 *
 * - no 'unsafe-inline' or 'unsafe-eval' for scripts: the page's scripts are all files (the plugin puts even the
 *   initialiser in swagger-initializer.js), so script-src stays 'self' (through default-src);
 * - img-src data: for the icons swagger-ui.css embeds as data: URIs (never a network request);
 * - connect-src is 'self' (through default-src): the UI fetches the document, and "Try it out" calls the API, on
 *   this origin only;
 * - no plugins, no <base> rewriting, no framing by other sites, forms post nowhere but here.
 */
export const API_REFERENCE_CSP = [
  "default-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * A Swagger UI plugin that shows JSON answers exactly. Swagger UI displays a JSON answer as
 * `JSON.stringify(JSON.parse(text), null, 2)`, which rounds every id past 2^53 (9007199254740993 is shown as
 * 9007199254740992); this wraps its response body to indent the text as it came instead, numbers untouched, and show
 * it as text. Runs in the page: the plugin serializes it, as source, into swagger-initializer.js (a file, so the
 * page's CSP keeps script-src 'self'); it must not refer to anything outside itself.
 */
function exactJsonResponses(): { wrapComponents: Record<string, unknown> } {
  function indent(text: string): string {
    let out = '';
    let depth = 0;
    const newline = () => `\n${'  '.repeat(depth)}`;
    for (let i = 0; i < text.length; i += 1) {
      const c = text.charAt(i);
      if (c === '"') {
        let end = i + 1;
        while (end < text.length && text.charAt(end) !== '"') end += text.charAt(end) === '\\' ? 2 : 1;
        out += text.slice(i, end + 1);
        i = end;
      } else if (c === '{' || c === '[') {
        const close = c === '{' ? '}' : ']';
        let next = i + 1;
        while (/\s/.test(text.charAt(next))) next += 1;
        if (text.charAt(next) === close) {
          out += c + close;
          i = next;
        } else {
          depth += 1;
          out += c + newline();
        }
      } else if (c === '}' || c === ']') {
        depth -= 1;
        out += newline() + c;
      } else if (c === ',') out += `,${newline()}`;
      else if (c === ':') out += ': ';
      else if (!/\s/.test(c)) out += c;
    }
    return out;
  }
  type Props = { content?: unknown; contentType?: unknown };
  type React = { createElement(type: unknown, props: Props): unknown };
  return {
    wrapComponents: {
      responseBody: (Original: unknown, system: { React: React }) => (props: Props) => {
        const json = typeof props.content === 'string' && /json/i.test(String(props.contentType ?? ''));
        if (!json) return system.React.createElement(Original, props);
        return system.React.createElement(Original, { ...props, content: indent(props.content as string), contentType: 'text/plain' });
      },
    },
  };
}

/** Swagger UI's own plugin that loads the document from `url`: named again, since giving `plugins` replaces its list. */
function downloadUrl(system: unknown): object {
  return (globalThis as unknown as { SwaggerUIBundle: { plugins: { DownloadUrl(system: unknown): object } } }).SwaggerUIBundle.plugins.DownloadUrl(system);
}

export interface ApiReferenceOptions {
  /** The OpenAPI document the page renders: the one built by src/http/openapi.ts; nothing is generated here. */
  readonly document: object;
}

/**
 * Serves Swagger UI at API_REFERENCE_PATH, rendering the app's OpenAPI document, with no token and nothing from
 * another host. @fastify/swagger-ui reads the document through @fastify/swagger's `swagger()` decorator, so
 * @fastify/swagger is registered in static mode, which serves a given document as it is and never looks at the
 * routes. Unlike the app's other plugins (src/http/plugins/) it is encapsulated: the decorator and the plugins' CSP
 * hook stay off the rest of the app.
 */
export const apiReference = fastifyPlugin<ApiReferenceOptions>(
  async (docs, { document }) => {
    // The plugin's types know OpenAPI 2.0 and 3.0 only; it hands any document on unchanged, 3.1 included.
    const specification: StaticDocumentSpec = { document: document as StaticDocumentSpec['document'] };
    await docs.register(fastifySwagger, { mode: 'static', specification });
    await docs.register(fastifySwaggerUi, {
      routePrefix: API_REFERENCE_PATH,
      // Set by the plugin on the page, its assets, its copy of the document and their 404s.
      staticCSP: API_REFERENCE_CSP,
      // Swagger UI would send the document to validator.swagger.io for a badge; the plugin's default is off too.
      validatorUrl: false,
      theme: { title: 'Plant Store API reference' },
      uiConfig: {
        // Without the top bar: its "Explore" box loads documents from any URL, and this page shows one document.
        layout: 'BaseLayout',
        // Client generators name methods after operationIds: show them beside each summary.
        displayOperationId: true,
        // Tokens typed into "Authorize" stay in the page's memory, never in localStorage.
        persistAuthorization: false,
        // Ids past 2^53 are shown as the server wrote them, not rounded by the page's JSON.parse.
        plugins: [downloadUrl, exactJsonResponses],
      },
    });
  },
  { name: 'api-reference', fastify: '5.x', encapsulate: true },
);
