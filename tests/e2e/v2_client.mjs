// Drives acp-agent with the npm SDK's ACP v2 client (`@agentclientprotocol/sdk/experimental/v2`),
// a client we did not write, which validates what it receives; prints one JSON object of
// what each step got, for pytest to assert on (`test_e2e_v2.py`).
//
//   node v2_client.mjs CWD STDERR_FILE COMMAND [ARGS...]
//
// The agent gets this process's environment (the test sets it). Exit 0 with the JSON on
// stdout, whatever the agent answered: failures are results too. `V2_SCENARIO` picks the
// steps: `life` (the default: a session's life), `turns` (the prompt lifecycle), `pieces`
// (per-piece cancel and background work) or `script`: the generic driver of
// `test_e2e_dialects.py`, see `script` below.

import { spawn } from "node:child_process";
import { openSync } from "node:fs";
import { Readable, Writable } from "node:stream";

import { client, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";
import { recordedWire } from "./recorded_wire.mjs";

const [cwd, stderrPath, command, ...args] = process.argv.slice(2);
const agent = spawn(command, args, {
  cwd,
  env: process.env,
  stdio: ["pipe", "pipe", openSync(stderrPath, "a")],
});
const wire = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
// Every frame as it crossed the pipe, both ways and in order, before the SDK parsed it.
const frames = [];
const frameWaiters = new Set();
const stream = recordedWire(wire, (direction, frame) => {
  frames.push({ [direction]: frame });
  for (const waiter of frameWaiters) waiter();
});
const permissionAnswers = []; // the option kinds the `script` answers with, in order

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
    if (process.env.V2_SCENARIO !== "script") {
      return { outcome: { outcome: "selected", optionId: "allow_once" } };
    }
    const kind = permissionAnswers.shift() ?? "allow_once";
    const option = params.options.find((o) => o.kind === kind);
    if (kind === "cancelled" || option === undefined) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: option.optionId } };
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

// --- the generic driver (`V2_SCENARIO=script`) -----------------------------------------
//
// `V2_SCRIPT` is JSON: `{"permissions": [kind, ...], "steps": [step, ...]}`. Permission
// requests are answered with the option of each kind in turn (then `allow_once`;
// `cancelled` cancels). Steps, in order:
//   {"op": "request", "method", "params", "as"?, "wait"?: true}  send; `wait: false` goes on
//   {"op": "notify", "method", "params"}
//   {"op": "turn", "params", "as"?}  `session/prompt`, then waits for its turn's idle
//   {"op": "until", "match", "count"?: 1}  waits until `count` received frames match
//   {"op": "settle"}  waits for every request still unanswered
// A string "$NAME.a.b" in params is the field a.b of the answer of the step named NAME.
// Prints one JSON line per frame ({"in": frame} / {"out": frame}) and per named step's
// answer ({"step": NAME, "result" | "error"}), so the test asserts on what crossed the wire.

// True when `frame` has every field of `pattern`, recursively (arrays compared whole).
function matches(value, pattern) {
  if (pattern === null || typeof pattern !== "object" || Array.isArray(pattern)) {
    return JSON.stringify(value) === JSON.stringify(pattern);
  }
  if (value === null || typeof value !== "object") return false;
  return Object.entries(pattern).every(([key, wanted]) => matches(value[key], wanted));
}

function receivedMatching(pattern, count) {
  return new Promise((resolve) => {
    const check = () => {
      if (frames.filter((f) => "in" in f && matches(f.in, pattern)).length < count) return;
      frameWaiters.delete(check);
      resolve();
    };
    frameWaiters.add(check);
    check();
  });
}

function substitute(value, answers) {
  if (typeof value === "string" && value.startsWith("$")) {
    const [name, ...path] = value.slice(1).split(".");
    return path.reduce((node, key) => node?.[key], answers[name]?.result);
  }
  if (Array.isArray(value)) return value.map((item) => substitute(item, answers));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, answers)]));
  }
  return value;
}

const idleOf = (sessionId) => ({
  method: "session/update",
  params: { sessionId, update: { sessionUpdate: "state_update", state: "idle" } },
});
const countReceived = (pattern) => frames.filter((f) => "in" in f && matches(f.in, pattern)).length;

async function script(ctx) {
  const { permissions = [], steps } = JSON.parse(process.env.V2_SCRIPT);
  permissionAnswers.push(...permissions);
  const answers = {};
  const pending = [];
  const named = (stepSpec, call) => {
    const answered = step(call).then((answer) => {
      if (stepSpec.as) {
        answers[stepSpec.as] = answer;
        frames.push({ step: stepSpec.as, ...answer });
      }
      return answer;
    });
    pending.push(answered);
    return answered;
  };
  await named({ as: "initialize" }, () =>
    ctx.request("initialize", {
      protocolVersion: 2,
      info: { name: "v2-e2e-script", version: "1.0.0" },
      capabilities: {},
    }),
  );
  for (const spec of steps) {
    const params = substitute(spec.params ?? {}, answers);
    if (spec.op === "request") {
      const answered = named(spec, () => ctx.request(spec.method, params));
      if (spec.wait !== false) await answered;
    } else if (spec.op === "notify") {
      await ctx.notify(spec.method, params);
    } else if (spec.op === "turn") {
      const idle = idleOf(params.sessionId);
      const before = countReceived(idle);
      const answer = await named(spec, () => ctx.request("session/prompt", params));
      if ("result" in answer) await receivedMatching(idle, before + 1);
    } else if (spec.op === "until") {
      await receivedMatching(substitute(spec.match, answers), spec.count ?? 1);
    } else if (spec.op === "settle") {
      await Promise.all(pending);
    } else {
      throw new Error(`unknown step ${JSON.stringify(spec)}`);
    }
  }
  await Promise.all(pending);
  return frames;
}

// --- per-piece cancel (`V2_SCENARIO=pieces`) ---------------------------------------------
//
// A running command's tool call cancelled once its first output is shown (`tool_call/cancel`),
// the same cancel again after the call ended, then a background job cancelled through its
// terminal (`terminal/cancel`) once its output is shown. Prints every frame, as `script`.

const received = (test) =>
  frames
    .filter((f) => f.in?.method === "session/update")
    .map((f) => f.in.params.update)
    .filter(test);
const updateOf = (sessionId, update) => ({ method: "session/update", params: { sessionId, update } });

async function pieces(ctx) {
  const answer = async (name, call) => {
    const got = await step(call);
    frames.push({ step: name, ...got });
    return got;
  };
  await answer("initialize", () => initialize(ctx).then((got) => got.result));
  const created = await answer("new", () => ctx.request("session/new", { cwd, mcpServers: [] }));
  const sessionId = created.result.sessionId;
  const prompt = (name, text) =>
    answer(name, () => ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] }));
  const idle = updateOf(sessionId, { sessionUpdate: "state_update", state: "idle" });
  const output = updateOf(sessionId, { sessionUpdate: "terminal_output_chunk" });

  const command = { command: "echo started; sleep 30; echo never" };
  await prompt("command", `[[tool shell ${JSON.stringify(command)}]] run it`);
  await receivedMatching(output, 1);
  const [running] = received((u) => u.sessionUpdate === "tool_call_update" && u.capabilities?.cancel);
  const toolCallId = running.toolCallId;
  await answer("cancelCall", () => ctx.request("tool_call/cancel", { sessionId, toolCallId }));
  await receivedMatching(idle, 1);
  await answer("cancelCallAgain", () => ctx.request("tool_call/cancel", { sessionId, toolCallId }));

  const job = { command: "echo up; sleep 30", background: true };
  await prompt("job", `[[tool shell ${JSON.stringify(job)}]] start it`);
  await receivedMatching(idle, 2);
  const opened = received((u) => u.sessionUpdate === "terminal_update" && "command" in u);
  const terminalId = opened[opened.length - 1].terminalId;
  await receivedMatching(updateOf(sessionId, { sessionUpdate: "terminal_output_chunk", terminalId }), 1);
  const nothingRuns = updateOf(sessionId, { sessionUpdate: "state_update", background: [] });
  const before = countReceived(nothingRuns);
  await answer("cancelTerminal", () => ctx.request("terminal/cancel", { sessionId, terminalId }));
  await receivedMatching(nothingRuns, before + 1);
  return frames;
}

const scenarios = { life, turns, script, pieces };
const results = await app.connectWith(stream, scenarios[process.env.V2_SCENARIO ?? "life"]);

agent.stdin.end();
if (["script", "pieces"].includes(process.env.V2_SCENARIO)) {
  for (const line of results) process.stdout.write(JSON.stringify(line) + "\n");
} else {
  process.stdout.write(JSON.stringify(results) + "\n");
}
