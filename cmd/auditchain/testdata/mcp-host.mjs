// An MCP host made of the official TypeScript SDK's client, for the Go tests that
// drive `auditchain mcp proxy` with it (mcp_realprog_test.go). The test copies it
// beside a node_modules link to the pinned programs and runs
//
//   node host.mjs '<plan>'
//
// where the plan is {command, args, env, calls: [{name, arguments, pause}], sessions,
// parallel, elicit}. It starts the server `command args` over stdio as a host does, lists
// every tool (page by page), makes each call with client.callTool — which checks a
// result against the tool's outputSchema and throws when it does not validate — and
// prints one JSON object: {serverInfo, capabilities, tools, results: [{result} or
// {error}]}. With sessions > 1 it instead starts that many sessions, `parallel` at a
// time, each connecting and listing the tools, and prints {sessions, failures}.
//
// With elicit (a list of answers, e.g. [{action: 'accept', content: {note: '…'}}]) the
// client declares the elicitation capability and answers each elicitation/create with
// the next answer (cancel when none is left); the requests' params are printed under
// elicitations. A call with pause: true is made only after the script has written
// "auditchain-test-host: paused before call <i>" on stderr and read a line on stdin, so
// the test can act between calls.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createInterface } from 'node:readline';

const plan = JSON.parse(process.argv[2]);

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function session(calls) {
  const transport = new StdioClientTransport({
    command: plan.command,
    args: plan.args ?? [],
    env: plan.env ?? {},
    stderr: 'inherit',
  });
  const client = new Client({ name: 'auditchain-test-host', version: '1' },
    { capabilities: plan.elicit ? { elicitation: {} } : {} });
  const elicitations = [];
  if (plan.elicit) {
    let next = 0;
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      elicitations.push(request.params);
      return plan.elicit[next++] ?? { action: 'cancel' };
    });
  }
  await client.connect(transport);
  try {
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    const results = [];
    for (const [i, { pause, ...call }] of calls.entries()) {
      if (pause) {
        process.stderr.write(`auditchain-test-host: paused before call ${i}\n`);
        await lines.next();
      }
      try {
        results.push({ result: await client.callTool(call) });
      } catch (e) {
        results.push({ error: { code: e.code ?? null, message: String(e.message ?? e) } });
      }
    }
    return {
      serverInfo: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      tools,
      results,
      elicitations,
    };
  } finally {
    await client.close();
  }
}

async function sessions(n, parallel) {
  const failures = [];
  let next = 0;
  async function worker() {
    while (next < n) {
      next++;
      try {
        const s = await session([]);
        if (s.tools.length === 0) failures.push('no tools listed');
      } catch (e) {
        failures.push(String(e.message ?? e));
      }
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker));
  return { sessions: n, failures };
}

// It exits when done: stdin, read for pauses, would keep it running.
let code = 0;
try {
  const out = plan.sessions > 1 ? await sessions(plan.sessions, plan.parallel ?? 1) : await session(plan.calls ?? []);
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ fatal: String(e.stack ?? e) }) + '\n');
  code = 1;
}
process.exit(code);
