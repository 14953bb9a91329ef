import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/variables.js';
import { tracingConfig } from '../../src/config/tracing.js';

describe('tracing settings (the standard OTEL_* variables)', () => {
  it('is off without an endpoint, and with OTEL_SDK_DISABLED=true whatever else is set', () => {
    assert.equal(tracingConfig({}), null);
    assert.equal(tracingConfig({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), null);
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }), null);
  });

  it('appends /v1/traces to the base endpoint and takes the traces endpoint as it is, which wins', () => {
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })?.url, 'http://collector:4318/v1/traces');
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example.com/otlp/' })?.url, 'https://otel.example.com/otlp/v1/traces');
    assert.equal(
      tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom' })?.url,
      'http://b:4318/custom',
    );
  });

  it('defaults to http/protobuf, service plantstore, parentbased_always_on at ratio 1', () => {
    const config = tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' });
    assert.deepEqual(config, {
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      serviceName: 'plantstore',
      resourceAttributes: {},
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
  });

  it('reads headers and resource attributes as percent-encoded key=value lists; OTEL_SERVICE_NAME wins over service.name', () => {
    const config = tracingConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s%3Dcret, x-team = plants',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=fromattrs,deployment.environment.name=prod',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0',
    });
    assert.deepEqual(config?.headers, { 'api-key': 's=cret', 'x-team': 'plants' });
    assert.equal(config?.serviceName, 'fromattrs');
    assert.equal(config?.sampler, 'traceidratio');
    assert.equal(config?.samplerRatio, 0);
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_SERVICE_NAME: 'named', OTEL_RESOURCE_ATTRIBUTES: 'service.name=x' })?.serviceName, 'named');
  });

  it('fails naming the variable on a value it cannot use', () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    for (const [variable, value] of [
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4317'],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://collector:4317'],
      ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
      ['OTEL_TRACES_SAMPLER', 'sometimes'],
      ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
      ['OTEL_TRACES_SAMPLER_ARG', 'half'],
      ['OTEL_EXPORTER_OTLP_HEADERS', 'novalue'],
      ['OTEL_RESOURCE_ATTRIBUTES', 'a=%E0%A4%A'],
      ['OTEL_SDK_DISABLED', 'maybe'],
    ] as const) {
      assert.throws(
        () => tracingConfig({ ...base, [variable]: value }),
        (error: unknown) => error instanceof ConfigError && error.variable === variable,
        `${variable}=${value}`,
      );
    }
  });
});
