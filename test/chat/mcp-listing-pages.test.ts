/**
 * An MCP server's tool listing is read page by page (`nextCursor`) until the server names no next
 * page, pages in circles, or lists past MCP_LISTING_LIMITS. A page that brings no usable tool is
 * no reason to stop: the usable tools of the pages after it are offered too.
 */
import { afterEach, expect, it } from 'vitest';
import { connectMcpTools } from '../../src/models/tools/mcp.js';
import { startRawMcpServer } from './raw-mcp-server.js';

type RawMcpServer = Awaited<ReturnType<typeof startRawMcpServer>>;
// These tests are about pages, not time: a minute covers 100 pages' round trips on a loaded CI
// machine (5 s did not).
const NO_RUSH = { connectTimeoutMs: 60_000, calls: { timeoutMs: 60_000 } };
const usable = { name: 'lookup', inputSchema: { type: 'object', properties: {} } };
let raw: RawMcpServer | undefined;
afterEach(async () => {
  await raw?.close();
  raw = undefined;
});

async function offeredBy(pages: unknown[][]) {
  raw = await startRawMcpServer({ tools: [], pages });
  const connected = await connectMcpTools([{ type: 'mcp', name: 'srv', url: raw.url }], NO_RUSH);
  await connected.close();
  return { tools: Object.keys(connected.tools), warnings: connected.warnings, requests: raw.requests };
}

it('reads on past a page whose tools are all invalid', async () => {
  const { tools, warnings } = await offeredBy([
    [
      { name: 'scalar', inputSchema: { type: 'string' } },
      { name: 'odd', inputSchema: { type: 'object', properties: 5 } },
    ],
    [usable],
  ]);
  expect(tools).toEqual(['srv_lookup']);
  expect(warnings.map((w) => [w.tool, w.code])).toEqual([
    ['srv_scalar', 'mcp_invalid_tool'],
    ['srv_odd', 'mcp_invalid_tool'],
  ]);
});

it('reads on past a page whose tools have no name', async () => {
  const { tools, warnings } = await offeredBy([
    [{ inputSchema: { type: 'object' } }, { name: 7, inputSchema: { type: 'object' } }],
    [usable],
  ]);
  // Such a page listed no tool seen before either: it was taken for a server paging in circles.
  expect(tools).toEqual(['srv_lookup']);
  expect(warnings.map((w) => [w.tool, w.code])).toEqual([
    ['srv', 'mcp_invalid_tool'],
    ['srv', 'mcp_invalid_tool'],
  ]);
});

it('reads on past an empty page that names a next one', async () => {
  const { tools, warnings, requests } = await offeredBy([[], [], [usable]]);
  expect(tools).toEqual(['srv_lookup']);
  expect(warnings).toEqual([]);
  expect(requests.filter((method) => method === 'tools/list')).toHaveLength(3);
});

it('still stops at a page that only lists tools seen before', async () => {
  const { tools, requests } = await offeredBy([[usable], [usable], [{ ...usable, name: 'later' }]]);
  expect(tools).toEqual(['srv_lookup']);
  expect(requests.filter((method) => method === 'tools/list')).toHaveLength(2);
});

it('stops at the page limit a server that sends empty pages forever', async () => {
  raw = await startRawMcpServer({ tools: [], endlessPages: 'new-cursor' });
  const connected = await connectMcpTools([{ type: 'mcp', name: 'srv', url: raw.url }], NO_RUSH);
  await connected.close();
  expect(connected.warnings).toEqual([
    expect.objectContaining({
      tool: 'srv',
      code: 'mcp_too_many_tools',
      message: expect.stringContaining('100 pages'),
    }),
  ]);
  expect(raw.requests.filter((method) => method === 'tools/list')).toHaveLength(100);
}, 60_000);

it('offers a tool listed valid after an invalid listing of the same name', async () => {
  const { tools, warnings } = await offeredBy([
    [{ name: 'lookup', inputSchema: { type: 'string' } }],
    [usable, { name: 'other', inputSchema: { type: 'object' } }],
  ]);
  expect(tools).toEqual(['srv_lookup', 'srv_other']);
  // The name is offered: the warning that its first listing was skipped is taken back.
  expect(warnings).toEqual([]);
});

it('keeps the first valid listing of a name and skips later ones', async () => {
  const { tools } = await offeredBy([
    [usable, { ...usable, description: 'again' }],
    [{ ...usable, name: 'x' }],
  ]);
  expect(tools).toEqual(['srv_lookup', 'srv_x']);
});

it('warns once of a name listed invalid twice', async () => {
  const bad = { name: 'lookup', inputSchema: { type: 'string' } };
  const { tools, warnings } = await offeredBy([[bad, { name: 'a', inputSchema: { type: 'object' } }], [bad]]);
  expect(tools).toEqual(['srv_a']);
  expect(warnings.map((w) => [w.tool, w.code])).toEqual([['srv_lookup', 'mcp_invalid_tool']]);
});

it('counts every invalid tool not warned of one by one once a warned name is listed valid', async () => {
  const invalid = Array.from({ length: 12 }, (_, n) => ({
    name: `bad${n}`,
    inputSchema: { type: 'string' },
  }));
  const { tools, warnings } = await offeredBy([invalid, [{ ...usable, name: 'bad0' }]]);
  expect(tools).toEqual(['srv_bad0']);
  // bad1 … bad10 warned of one by one, bad11 in the count; bad0's warning is taken back.
  expect(warnings.map((w) => w.tool)).toEqual([
    ...Array.from({ length: 9 }, (_, n) => `srv_bad${n + 1}`),
    'srv',
  ]);
  expect(warnings.at(-1)?.message).toBe('MCP tools skipped: 2 more not valid');
});
