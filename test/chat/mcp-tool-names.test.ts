/**
 * MCP tools are offered as `<server>_<tool>`, cut to 64 characters: two servers' tools can come
 * out with one name (`a_b` + `c` and `a` + `b_c`; two long names alike in their first 64
 * characters). The later one silently replaced the earlier; now the first keeps the name and the
 * other is skipped with a warning the client sees.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectMcpTools } from '../../src/models/tools/mcp.js';
import { startRawMcpServer } from './raw-mcp-server.js';

type RawMcpServer = Awaited<ReturnType<typeof startRawMcpServer>>;
const schema = { type: 'object', properties: {} };
let first: RawMcpServer;
let second: RawMcpServer;
beforeAll(async () => {
  first = await startRawMcpServer({ tools: [{ name: 'c', description: 'first', inputSchema: schema }] });
  second = await startRawMcpServer({ tools: [{ name: 'b_c', description: 'second', inputSchema: schema }] });
});
afterAll(async () => {
  await first.close();
  await second.close();
});

it('keeps the first of two tools whose offered names are one, and warns of the other', async () => {
  const connected = await connectMcpTools(
    [
      { type: 'mcp', name: 'a_b', url: first.url },
      { type: 'mcp', name: 'a', url: second.url },
    ],
    { connectTimeoutMs: 5_000, calls: { timeoutMs: 5_000 } },
  );
  try {
    expect(Object.keys(connected.tools)).toEqual(['a_b_c']);
    expect(connected.tools['a_b_c']!.description).toBe('first');
    expect(connected.warnings).toEqual([
      {
        tool: 'a_b_c',
        code: 'mcp_invalid_tool',
        message: 'MCP tool skipped: tool b_c of server a is offered as a_b_c, the name of another tool',
      },
    ]);
  } finally {
    await connected.close();
  }
});
