// Plays Claude Code's side of a channel with the official MCP TypeScript SDK
// (the same SDK Claude Code builds on): it starts the channel as a stdio
// subprocess, declares what Claude Code 2.1.328 declares, and prints one
// JSON object per line:
//   {"event":"ready","experimental","instructions","tools"}
//   {"event":"channel","params":{content, meta}}   notifications/claude/channel
//   {"event":"verdict","params":{request_id, behavior}}
//   {"event":"replied","result":...}
// Commands on stdin, one a line:
//   perm ID TOOL PREVIEW   sends notifications/claude/channel/permission_request
//   reply TEXT             calls the reply tool
//   quit                   closes the channel's stdin and exits
//
// Usage: node claude.mjs SDK_NODE_MODULES COMMAND [ARG...]
// (the SDK is imported from the mcp package's test client, SDK_NODE_MODULES;
// the channel's environment is this process's PARLEY_CHANNEL_* variables).
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, command, ...args] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(join(sdkDir, '@modelcontextprotocol', 'sdk', 'dist', 'esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport, getDefaultEnvironment } = await sdk('client/stdio.js');

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const fail = (err) => {
  out({ event: 'error', message: String(err && err.stack ? err.stack : err) });
  process.exit(1);
};
setTimeout(() => fail('timed out'), 60_000).unref();

const env = getDefaultEnvironment();
for (const [k, v] of Object.entries(process.env)) {
  if (k.startsWith('PARLEY_')) env[k] = v;
}
const transport = new StdioClientTransport({ command, args, env, stderr: 'inherit' });
const client = new Client(
  { name: 'claude-code', title: 'Claude Code', version: '2.1.328' },
  { capabilities: { roots: { listChanged: true }, elicitation: { form: {}, url: {} } } },
);
// Claude Code handles the channel's notifications with handlers of its
// own schemas; the SDK's fallback sees every notification it has no
// schema for.
client.fallbackNotificationHandler = async (n) => {
  if (n.method === 'notifications/claude/channel') out({ event: 'channel', params: n.params });
  else if (n.method === 'notifications/claude/channel/permission') out({ event: 'verdict', params: n.params });
};

try {
  await client.connect(transport);
  const tools = await client.listTools();
  out({
    event: 'ready',
    experimental: client.getServerCapabilities()?.experimental ?? null,
    instructions: client.getInstructions() ?? '',
    tools: tools.tools.map((t) => t.name),
  });
} catch (err) {
  fail(err);
}

for await (const line of createInterface({ input: process.stdin })) {
  const [verb, ...rest] = line.split(' ');
  try {
    if (verb === 'perm') {
      const [request_id, tool_name, ...preview] = rest;
      await client.notification({
        method: 'notifications/claude/channel/permission_request',
        params: { request_id, tool_name, description: `Run ${tool_name}`, input_preview: preview.join(' ') },
      });
    } else if (verb === 'reply') {
      const result = await client.callTool({ name: 'reply', arguments: { text: rest.join(' ') } });
      out({ event: 'replied', result });
    } else if (verb === 'quit') {
      await client.close();
      out({ event: 'closed' });
      process.exit(0);
    }
  } catch (err) {
    fail(err);
  }
}
