/**
 * The JSON body path, without HTTP: media type and content coding checks, the parser (JSON.parse where a double reads
 * the body exactly, the exact parser otherwise), and the plant a parsed body asks for, its id exact over all of int64.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BadRequestError, UnsupportedMediaTypeError } from '../../src/http/errors.js';
import { checkContentEncoding, checkJsonMediaType, parseJsonBody, plantFromBody, readsExactly } from '../../src/http/json-body.js';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import type { Plant } from '../../src/plant.js';
import type { NewPlantBody } from '../../src/schemas.js';

const INT64_RANGE = 'id must be an integer from -9223372036854775808 to 9223372036854775807 (int64)';

/** What POST /plants makes of a body that passes the schema: parsed, then the plant with its exact id. */
function plantOf(text: string): Plant {
  return plantFromBody(parseJsonBody(Buffer.from(text)) as NewPlantBody);
}

/** For assert.throws: a 400 whose message is `message` (a string) or matches it (a RegExp). */
function badRequest(message: string | RegExp) {
  return { name: BadRequestError.name, status: 400, message };
}

describe('plantFromBody(parseJsonBody(...)): the id, exactly', () => {
  const accepted: ReadonlyArray<readonly [body: string, id: bigint]> = [
    ['{"id":5,"name":"a"}', 5n],
    ['{"id":-5,"name":"a"}', -5n],
    ['{"id":0,"name":"a"}', 0n],
    ['{"id":-0,"name":"a"}', 0n],
    // As in JSON Schema, these are the integer 12.
    ['{"id":12.0,"name":"a"}', 12n],
    ['{"id":1.2e1,"name":"a"}', 12n],
    ['{"id":120E-1,"name":"a"}', 12n],
    ['{"id":1e0,"name":"a"}', 1n],
    // 2^53 and 2^53 + 1: the first is still a double, the second only exact.
    ['{"id":9007199254740992,"name":"a"}', 9007199254740992n],
    ['{"id":9007199254740993,"name":"a"}', 9007199254740993n],
    ['{"id":-9007199254740993,"name":"a"}', -9007199254740993n],
    ['{"id":9007199254740993.0,"name":"a"}', 9007199254740993n],
    ['{"id":9223372036854775807,"name":"a"}', INT64_MAX],
    ['{"id":9.223372036854775807e18,"name":"a"}', INT64_MAX],
    ['{"id":-9223372036854775808,"name":"a"}', INT64_MIN],
    // Whitespace and key order do not matter.
    ['  {"name":"a" ,\n"id" : 9007199254740993 }\t', 9007199254740993n],
  ];
  for (const [body, id] of accepted) {
    it(`${body.trim()} → id ${id}`, () => {
      assert.deepEqual(plantOf(body), { id, name: 'a', tag: null });
    });
  }

  const refused: ReadonlyArray<string> = [
    '{"id":9223372036854775808,"name":"a"}',
    '{"id":-9223372036854775809,"name":"a"}',
    '{"id":9.223372036854775808e18,"name":"a"}',
    '{"id":18446744073709551616,"name":"a"}',
    '{"id":1e400,"name":"a"}',
    '{"id":-1e400,"name":"a"}',
    '{"id":1e1000000,"name":"a"}',
    `{"id":${'9'.repeat(500)},"name":"a"}`,
    '{"id":1.5,"name":"a"}',
    // A double reads these as integers; they are not.
    '{"id":1.0000000000000000000001,"name":"a"}',
    '{"id":9007199254740993.5,"name":"a"}',
    '{"id":1e-400,"name":"a"}',
  ];
  for (const body of refused) {
    it(`${body.length > 60 ? `${body.slice(0, 40)}…` : body} → 400 naming the int64 range`, () => {
      assert.throws(() => plantOf(body), badRequest(INT64_RANGE));
    });
  }

  it('keeps tag when given and makes it null when absent', () => {
    assert.deepEqual(plantOf('{"id":1,"name":"a","tag":"b"}'), { id: 1n, name: 'a', tag: 'b' });
    assert.deepEqual(plantOf('{"id":1,"name":"a","tag":""}'), { id: 1n, name: 'a', tag: '' });
    assert.deepEqual(plantOf('{"id":9007199254740993,"name":"a","tag":"b"}'), { id: 9007199254740993n, name: 'a', tag: 'b' });
  });
});

describe('readsExactly: which bodies JSON.parse may read', () => {
  const fast: ReadonlyArray<string> = [
    '{"id":5,"name":"a"}',
    '{"id":900719925474099,"name":"a","tag":"b"}', // 15 digits: below 2^53 whatever they are
    '{"id":-5,"name":"Ficus lyrata 2","tag":"fig"}',
    '{"id":5,"name":"ide","tag":"tags"}', // a key's letters inside a longer string are no key
    '{"id":5,"name":"é 🌱"}',
    '{"id":5,"name":"a","x":1,"x":2}', // only a repeated id, name or tag could change what is stored
    '{"id":5,"name":"e5"}',
    '"id',
  ];
  for (const body of fast) {
    it(`${body}: JSON.parse`, () => assert.equal(readsExactly(Buffer.from(body)), true));
  }
  const exact: ReadonlyArray<string> = [
    '{"id":9007199254740993,"name":"a"}', // 16 digits
    '{"id":5,"name":"1234567890123456"}', // such text inside a string too
    '{"id":12.0,"name":"a"}',
    '{"id":1e0,"name":"a"}',
    '{"id":1E0,"name":"a"}',
    '{"id":5,"name":"a\\u0062"}',
    '{"id":5,"id":6,"name":"a"}',
    '{"id":5,"name":"a","name":"b"}',
    '{"id":5,"name":"a","tag":"b","tag":"c"}',
    '{"id":5,"name":"tag","tag":"a"}', // a key's spelling as a value counts as a copy: slower, never wrong
  ];
  for (const body of exact) {
    it(`${body}: the exact parser`, () => assert.equal(readsExactly(Buffer.from(body)), false));
  }
  it('reads the same either way', () => {
    assert.deepEqual(parseJsonBody(Buffer.from('{"id":5,"name":"tag","tag":"a"}')), { id: 5, name: 'tag', tag: 'a' });
  });
});

describe('parseJsonBody', () => {
  it('reads escapes exactly (the exact path), surrogate pairs included', () => {
    assert.deepEqual(parseJsonBody(Buffer.from('{"id":5,"name":"a\\u0062\\n","tag":"\\ud83c\\udf31"}')), { id: 5, name: 'ab\n', tag: '🌱' });
  });

  it('answers the same on both paths: JSON.parse and the exact parser', () => {
    // The escape sends the second through the exact parser; the value is the same.
    assert.deepEqual(parseJsonBody(Buffer.from('{"id":5,"name":"ab","tag":[1,2.5,true,null]}')), { id: 5, name: 'ab', tag: [1, 2.5, true, null] });
    assert.deepEqual(parseJsonBody(Buffer.from('{"id":5,"name":"a\\u0062","tag":[1,2.5,true,null]}')), { id: 5, name: 'ab', tag: [1, 2.5, true, null] });
  });

  it('leaves other repeated keys to the schema, which refuses every key but id, name and tag, and any nesting', () => {
    // Only a repeated id, name or tag could change what is stored, so only those send a body to the exact parser.
    assert.deepEqual(parseJsonBody(Buffer.from('{"id":5,"name":"a","x":1,"x":2}')), { id: 5, name: 'a', x: 2 });
  });

  const refused: ReadonlyArray<readonly [what: string, body: Buffer, message: string | RegExp]> = [
    ['an empty body', Buffer.alloc(0), 'request body is empty; a JSON NewPlant is required'],
    ['whitespace only', Buffer.from(' \n'), /^request body is not valid JSON: /],
    ['truncated JSON', Buffer.from('{"id":5,"name":"a"'), /^request body is not valid JSON: /],
    ['truncated JSON on the exact path', Buffer.from('{"id":5e0,"name":"a"'), /^request body is not valid JSON: /],
    ['a leading zero', Buffer.from('{"id":05,"name":"a"}'), /^request body is not valid JSON: /],
    ['a plus sign', Buffer.from('{"id":+5,"name":"a"}'), /^request body is not valid JSON: /],
    ['a trailing comma', Buffer.from('{"id":5,"name":"a",}'), /^request body is not valid JSON: /],
    ['a repeated name', Buffer.from('{"id":5,"name":"a","name":"b"}'), /^request body is not valid JSON: Duplicate key 'name'/],
    ['a repeated id', Buffer.from('{"id":5,"id":6,"name":"a"}'), /^request body is not valid JSON: Duplicate key 'id'/],
    ['a key repeated through an escape', Buffer.from('{"id":5,"name":"a","n\\u0061me":"b"}'), /^request body is not valid JSON: Duplicate key 'name'/],
    ['a repeated tag', Buffer.from('{"id":5,"name":"a","tag":"b","tag":"c"}'), /^request body is not valid JSON: Duplicate key 'tag'/],
    ['a name repeated with the same value', Buffer.from('{"id":5,"name":"a","name":"a"}'), /^request body is not valid JSON: Duplicate key 'name'/],
    ['an id repeated with the same value', Buffer.from('{"id":5,"id":5,"name":"a"}'), /^request body is not valid JSON: Duplicate key 'id'/],
    ['the same name through an escape', Buffer.from('{"id":5,"name":"a","n\\u0061me":"a"}'), /^request body is not valid JSON: Duplicate key 'name'/],
    ['a key repeated in a nested object (exact path: 5e0)', Buffer.from('{"id":5e0,"name":"a","tag":{"k":1,"k":1}}'), /^request body is not valid JSON: Duplicate key 'k'/],
    ['a lone high surrogate', Buffer.from('{"id":5,"name":"\\ud800"}'), /lone UTF-16 surrogate/],
    ['a lone low surrogate', Buffer.from('{"id":5,"name":"\\udc00x"}'), /lone UTF-16 surrogate/],
    ['surrogates in the wrong order', Buffer.from('{"id":5,"name":"\\udf31\\ud83c"}'), /lone UTF-16 surrogate/],
    ['a lone surrogate in a key', Buffer.from('{"id":5,"name":"a","\\ud800":1}'), /lone UTF-16 surrogate/],
    ['a lone surrogate deep inside', Buffer.from('{"id":5,"name":"a","tag":[{"k":["\\udbff"]}]}'), /lone UTF-16 surrogate/],
    ['bytes 0xFF 0xFE', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), 'request body is not valid UTF-8'],
    ['an overlong "/"', Buffer.concat([Buffer.from('{"id":5,"name":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]), 'request body is not valid UTF-8'],
    ['an encoded surrogate', Buffer.concat([Buffer.from('{"id":5,"name":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]), 'request body is not valid UTF-8'],
    ['a truncated sequence', Buffer.concat([Buffer.from('{"id":5,"name":"'), Buffer.from([0xe2, 0x82])]), 'request body is not valid UTF-8'],
    ['100k nested arrays on the exact path', Buffer.from(`${'['.repeat(100_000)}1e0${']'.repeat(100_000)}`), 'request body is nested too deeply'],
  ];
  for (const [what, body, message] of refused) {
    it(`refuses ${what} with 400`, () => {
      assert.throws(() => parseJsonBody(body), badRequest(message));
    });
  }

  // Texts that name a key twice only as values, or in different objects: the exact path, and no duplicate.
  const notDuplicates: ReadonlyArray<readonly [what: string, body: string]> = [
    ['a value spelling a key', '{"id":5,"name":"name","tag":"name"}'],
    ['a key inside a string with quotes and escapes', '{"id":5,"name":"\\"name\\":","tag":"x"}'],
    ['the same key in sibling objects', '[{"name":"a"},{"name":"a"}]'],
    ['the same key in a nested object and its parent', '{"id":5,"name":"a","tag":{"name":"a"}}'],
  ];
  for (const [what, body] of notDuplicates) {
    it(`accepts ${what}`, () => {
      assert.doesNotThrow(() => parseJsonBody(Buffer.from(body)));
    });
  }
});

describe('checkJsonMediaType', () => {
  const accepted = [
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset=UTF-8',
    'application/json; CHARSET=Utf-8',
    'application/json; charset="utf-8"',
    'application/json ; charset = utf-8 ',
    'application/json; foo=bar',
    'application/json; foo=bar; charset=utf-8',
  ];
  for (const contentType of accepted) {
    it(`accepts ${JSON.stringify(contentType)}`, () => {
      assert.doesNotThrow(() => checkJsonMediaType(contentType));
    });
  }

  const refused: ReadonlyArray<readonly [contentType: string, named: string]> = [
    ['application/json; charset=iso-8859-1', 'iso-8859-1'],
    ['application/json; charset=latin1', 'latin1'],
    ['application/json; charset=utf-16', 'utf-16'],
    ['application/json; charset=UTF-16LE', 'utf-16le'],
    // Only the registered name: aliases are not guessed at.
    ['application/json; charset=utf8', 'utf8'],
    ['application/json; charset=', ''],
    ['application/json; charset=utf-8; charset=latin1', 'latin1'],
  ];
  for (const [contentType, named] of refused) {
    it(`refuses ${JSON.stringify(contentType)} with 415 naming the charset`, () => {
      assert.throws(() => checkJsonMediaType(contentType), {
        name: UnsupportedMediaTypeError.name,
        status: 415,
        message: `charset ${named} is not supported; send JSON as UTF-8`,
      });
    });
  }
});

describe('checkContentEncoding', () => {
  for (const header of [undefined, '', 'identity', 'IDENTITY', ' identity , identity ', ',']) {
    it(`accepts ${JSON.stringify(header)}`, () => {
      assert.doesNotThrow(() => checkContentEncoding(header));
    });
  }

  const refused: ReadonlyArray<readonly [header: string, named: string]> = [
    ['gzip', 'gzip'],
    ['GZIP', 'gzip'],
    ['br', 'br'],
    ['identity, gzip', 'gzip'],
    ['gzip, br', 'gzip, br'],
    ['x-unknown', 'x-unknown'],
  ];
  for (const [header, named] of refused) {
    it(`refuses ${JSON.stringify(header)} with 415 naming ${named}, and Accept-Encoding: identity`, () => {
      assert.throws(() => checkContentEncoding(header), {
        name: UnsupportedMediaTypeError.name,
        status: 415,
        message: `Content-Encoding ${named} is not supported; send the body without a content coding`,
        headers: { 'accept-encoding': 'identity' },
      });
    });
  }
});
