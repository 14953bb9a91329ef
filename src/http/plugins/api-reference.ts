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
      },
    });
  },
  { name: 'api-reference', fastify: '5.x', encapsulate: true },
);
