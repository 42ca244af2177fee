// Drives acp-agent with the npm SDK's ACP v2 client (`@agentclientprotocol/sdk/experimental/v2`),
// a client we did not write, which validates what it receives; prints one JSON object of
// what each step got, for pytest to assert on (`test_e2e_v2.py`).
//
//   node v2_client.mjs CWD STDERR_FILE COMMAND [ARGS...]
//
// The agent gets this process's environment (the test sets it). Exit 0 with the JSON on
// stdout, whatever the agent answered: failures are results too. `V2_SCENARIO` picks the
// steps: `life` (the default: a session's life) or `turns` (the prompt lifecycle).

import { spawn } from "node:child_process";
import { openSync } from "node:fs";
import { Readable, Writable } from "node:stream";

import { client, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";

const [cwd, stderrPath, command, ...args] = process.argv.slice(2);
const agent = spawn(command, args, {
  cwd,
  env: process.env,
  stdio: ["pipe", "pipe", openSync(stderrPath, "a")],
});
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

const updates = [];
const arrivals = []; // updates and answers, in the order they came
const waiters = new Set();
const app = client({ name: "v2-e2e" })
  .onNotification("session/update", ({ params }) => {
    updates.push(params);
    arrivals.push({ update: params.update });
    for (const waiter of waiters) waiter();
  })
  .onRequest("session/request_permission", ({ params }) => {
    arrivals.push({ asked: params });
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  });

// Resolves once `count` updates have matched `test` (those already in count too).
function updatesMatching(test, count = 1) {
  return new Promise((resolve) => {
    const check = () => {
      if (updates.filter((n) => test(n.update)).length < count) return;
      waiters.delete(check);
      resolve();
    };
    waiters.add(check);
    check();
  });
}
const isIdle = (u) => u.sessionUpdate === "state_update" && u.state === "idle";

// A step's answer, or the error it got (code and message), never a throw.
async function step(call) {
  try {
    return { result: await call() };
  } catch (error) {
    return { error: { code: error.code ?? null, message: String(error.message ?? error) } };
  }
}

async function initialize(ctx) {
  return step(() =>
    ctx.request("initialize", {
      protocolVersion: 2,
      info: { name: "v2-e2e", version: "1.0.0" },
      capabilities: {},
    }),
  );
}

// The prompt lifecycle: answers at insertion, FIFO, an idempotent repeat, a cancel, and
// a resume that replays the history.
async function turns(ctx) {
  const got = { initialize: await initialize(ctx) };
  got.new = await step(() => ctx.request("session/new", { cwd, mcpServers: [] }));
  const sessionId = got.new.result?.sessionId;
  const prompt = async (name, text, extra = {}) => {
    const params = { sessionId, prompt: [{ type: "text", text }], ...extra };
    const answer = await step(() => ctx.request("session/prompt", params));
    arrivals.push({ answer: name, ...answer });
    return answer;
  };
  // The session's first prompt alone: it announces the session's commands before its turn
  // queues, and a prompt sent right behind it could overtake it there (see the report).
  await prompt("first", "one");
  await updatesMatching(isIdle, 1);
  await Promise.all([prompt("second", "two"), prompt("third", "three")]);
  await updatesMatching(isIdle, 3);
  const key = { idempotencyKey: "retry-1" };
  await Promise.all([prompt("once", "only once", key), prompt("again", "only once", key)]);
  await updatesMatching(isIdle, 4);
  await prompt("slow", "[[slow 0.5]] a long and slow reply to cancel");
  await ctx.notify("session/cancel", { sessionId });
  await updatesMatching(isIdle, 5);
  await prompt("write", '[[tool write_file {"path": "notes.txt", "content": "hi"}]] write');
  await updatesMatching(isIdle, 6);
  got.close = await step(() => ctx.request("session/close", { sessionId }));
  arrivals.push({ resuming: true });
  const replayFrom = { type: "start" };
  const resumed = await step(() => ctx.request("session/resume", { sessionId, cwd, replayFrom }));
  arrivals.push({ answer: "resume", ...resumed });
  got.arrivals = arrivals;
  return got;
}

async function life(ctx) {
  const got = { initialize: await initialize(ctx) };
  got.new = await step(() => ctx.request("session/new", { cwd, mcpServers: [] }));
  const sessionId = got.new.result?.sessionId;
  got.list = await step(() => ctx.request("session/list", {}));
  got.setConfigOption = await step(() =>
    ctx.request("session/set_config_option", {
      sessionId,
      configId: "mode",
      type: "id",
      value: "read-only",
    }),
  );
  got.setMode = await step(() => ctx.request("session/set_mode", { sessionId, modeId: "ask" }));
  got.load = await step(() =>
    ctx.request("session/load", { sessionId, cwd, mcpServers: [] }),
  );
  got.close = await step(() => ctx.request("session/close", { sessionId }));
  got.logout = await step(() => ctx.request("auth/logout", {}));
  got.updates = updates;
  return got;
}

const scenarios = { life, turns };
const results = await app.connectWith(stream, scenarios[process.env.V2_SCENARIO ?? "life"]);

agent.stdin.end();
process.stdout.write(JSON.stringify(results) + "\n");
