// End-to-end client for parley's MCP server, using the official TypeScript SDK.
//
// Usage: node client.mjs URL
//        node client.mjs URL read AFTER_ID
//
// The second form only calls chat_read_since {after_id: AFTER_ID}, prints
// {"event":"read", ...} and exits: catching up after a daemon restart.
//
// It connects over Streamable HTTP, subscribes to ui://chat/inbox and prints
// one JSON object per line on stdout:
//   {"event":"ready", ...}          subscribed; the test may post now
//   {"event":"notification", ...}   a notifications/resources/updated
//   {"event":"read", ...}           chat_read_since after the first notification
// Then it waits for a line on stdin (the test posted an assistant message),
// gives late notifications a moment, prints {"event":"done","notifications":N}
// and exits.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { createInterface } from 'node:readline';

const url = process.argv[2];
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const fail = (err) => {
  out({ event: 'error', message: String(err && err.stack ? err.stack : err) });
  process.exit(1);
};
setTimeout(() => fail('timed out'), 60_000).unref();

const lines = createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => lines.once('line', resolve));

const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(`no ${what} within ${ms}ms`)), ms))]);

if (process.argv[3] === 'read') {
  try {
    const client = new Client({ name: 'parley-ts-e2e', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    const res = await client.callTool({ name: 'chat_read_since', arguments: { after_id: process.argv[4] } });
    if (res.isError) fail(JSON.stringify(res.content));
    out({ event: 'read', result: JSON.parse(res.content[0].text) });
    await transport.terminateSession().catch(() => {});
    await client.close();
    process.exit(0);
  } catch (err) {
    fail(err);
  }
}

try {
  const client = new Client({ name: 'parley-ts-e2e', version: '1.0.0' });
  let notifications = 0;
  let first;
  const firstSeen = new Promise((resolve) => (first = resolve));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    notifications++;
    first(n.params);
  });

  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  // The SDK's schema keeps only the fields it knows; record what came on the
  // wire too, to check the messages batch.
  const raw = [];
  const onmessage = transport.onmessage;
  transport.onmessage = (msg, extra) => {
    if (msg.method === 'notifications/resources/updated') raw.push(msg.params);
    onmessage(msg, extra);
  };

  await client.subscribeResource({ uri: 'ui://chat/inbox' });
  out({ event: 'ready', protocolVersion: transport.protocolVersion, server: client.getServerVersion() });

  const params = await withTimeout(firstSeen, 15_000, 'notification');
  out({ event: 'notification', params, raw: raw[0] });

  const res = await client.callTool({ name: 'chat_read_since', arguments: {} });
  if (res.isError) fail(JSON.stringify(res.content));
  out({ event: 'read', result: JSON.parse(res.content[0].text), structured: res.structuredContent });

  await withTimeout(nextLine(), 15_000, 'go-ahead on stdin');
  await new Promise((resolve) => setTimeout(resolve, 500));
  out({ event: 'done', notifications });
  await transport.terminateSession().catch(() => {});
  await client.close();
  process.exit(0);
} catch (err) {
  fail(err);
}
