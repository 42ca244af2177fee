// An editor that provides MCP servers over ACP (`mcpServers` entries of type `acp`), built
// on the npm `@agentclientprotocol/sdk` (2.4.0, whose unstable v1 schema we follow): its
// `ClientApp` drives the agent over stdio and its `McpOverAcpProvider` answers the agent's
// `mcp/message` requests. Behind the provider sits a REAL MCP server subprocess (one of
// tests/mcp_servers) on stdio: each inner request is relayed to it under its `requestId`,
// its answer comes back as the inner outcome, and its notifications as `mcp/message`
// notifications of the request they belong to: a call's progress (by its token), and the
// frames of a `subscriptions/listen` stream (stamped with that request's id), which stays
// active while the stream lasts: the server's list changes come that way.
//
// Reads one JSON object on stdin:
//   agent: [command, ...args], cwd, env, stderr (a file for the agent's stderr),
//   server: [command, ...args] (the MCP server), serverEnv,
//   refuse: [tool names whose `tools/call` the editor answers with an inner MCP error],
//   ghost: a name declared with a serverId the editor never registered (or null),
//   prompts: [texts, sent one after the other to one session], mode (or null),
//   cancelOnProgress: send `session/cancel` once a tool call shows progress
// Writes one JSON object on stdout: initialize's agentCapabilities, the stop reasons, every
// session/update, the inner methods the editor was asked, the permission questions, and
// every frame exchanged with the agent (`frames`: {"in": frame} / {"out": frame}, in order).

import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { createInterface } from "node:readline";
import { Readable, Writable } from "node:stream";
import { text } from "node:stream/consumers";
import {
  ClientApp,
  McpOverAcpProvider,
  McpProtocolError,
  ndJsonStream,
} from "@agentclientprotocol/sdk/unstable";
import { recordedWire } from "./recorded_wire.mjs";

const spec = JSON.parse(await text(process.stdin));

/** A stdio MCP server spoken to in raw JSON-RPC lines (2026-07-28: no handshake). */
class StdioServer {
  constructor(argv, env) {
    this.child = spawn(argv[0], argv.slice(1), {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "ignore"],
    });
    this.pending = new Map();
    this.progress = new Map();
    this.streams = new Map(); // request id -> the notify of a request still active
    createInterface({ input: this.child.stdout }).on("line", (line) => this.receive(line));
  }

  receive(line) {
    const message = JSON.parse(line);
    if ("id" in message && this.pending.has(message.id)) {
      this.pending.get(message.id)(message);
      this.pending.delete(message.id);
    } else if (message.method === "notifications/progress") {
      this.progress.get(message.params?.progressToken)?.(message.method, message.params);
    } else {
      const stream = message.params?._meta?.["io.modelcontextprotocol/subscriptionId"];
      this.streams.get(stream)?.(message.method, message.params);
    }
  }

  request(id, method, params, onNotify) {
    const token = params?._meta?.progressToken;
    if (token !== undefined && onNotify) this.progress.set(token, onNotify);
    if (onNotify) this.streams.set(id, onNotify);
    return new Promise((resolve) => {
      this.pending.set(id, (reply) => {
        this.progress.delete(token);
        this.streams.delete(id);
        resolve(reply);
      });
      this.write({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    });
  }

  write(message) {
    this.child.stdin.write(JSON.stringify(message) + "\n");
  }

  close() {
    this.child.stdin.end();
  }
}

const report = { stops: [], updates: [], asked: [], permissions: [], frames: [] };
const server = new StdioServer(spec.server, spec.serverEnv ?? {});
const refused = new Set(spec.refuse ?? []);

async function relay(operation) {
  const { requestId, method, params } = operation;
  report.asked.push(method === "tools/call" ? `${method} ${params?.name}` : method);
  if (method === "tools/call" && refused.has(params?.name)) {
    throw new McpProtocolError(-32603, `the editor refused ${params.name}: not on this machine`);
  }
  // A cancelled request ends at once; the server, told so, answers it never.
  const aborted = new Promise((_, reject) =>
    operation.signal.addEventListener("abort", () => {
      server.write({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId } });
      reject(operation.signal.reason);
    }),
  );
  const answered = server.request(requestId, method, params, (m, p) => operation.notify(m, p));
  const reply = await Promise.race([answered, aborted]);
  return "error" in reply ? { error: reply.error } : { result: reply.result };
}

let cancelled = false;
let agentContext = null;
function maybeCancel({ sessionId, update }) {
  const progressed = update.sessionUpdate === "tool_call_update" && update.content?.length;
  if (spec.cancelOnProgress && progressed && !cancelled && update.status !== "completed") {
    cancelled = true;
    report.cancelledAfter = update.content.map((item) => item.content?.text).join("");
    void agentContext.notify("session/cancel", { sessionId });
  }
}

const provider = new McpOverAcpProvider();
const app = new ClientApp()
  .onRequest("mcp/message", provider.handleRequest)
  .onNotification("session/update", ({ params }) => {
    report.updates.push(params);
    maybeCancel(params);
  })
  .onRequest("session/request_permission", ({ params }) => {
    report.permissions.push(params.toolCall.title);
    const allow = params.options.find((option) => option.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });

const agentStderr = createWriteStream(spec.stderr, { flags: "a" });
await new Promise((resolve) => agentStderr.on("open", resolve));
const agent = spawn(spec.agent[0], spec.agent.slice(1), {
  cwd: spec.cwd,
  env: spec.env,
  stdio: ["pipe", "pipe", agentStderr],
});
const wire = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
// Every frame as it crossed the pipe: the test checks the agent's against the schema.
const stream = recordedWire(wire, (direction, frame) => report.frames.push({ [direction]: frame }));

try {
  await app.connectWith(stream, async (context) => {
    agentContext = context;
    const started = await context.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: {},
      clientInfo: { name: "e2e-mcp-over-acp", version: "0.0.0" },
    });
    report.agentCapabilities = started.agentCapabilities;
    const tools = provider.registerServer(context, { name: "tools", handler: relay });
    const servers = [tools.declaration];
    if (spec.ghost) servers.push({ type: "acp", name: spec.ghost, serverId: `${spec.ghost}-id` });
    const session = await context.request("session/new", { cwd: spec.cwd, mcpServers: servers });
    report.sessionId = session.sessionId;
    if (spec.mode) {
      await context.request("session/set_mode", { sessionId: session.sessionId, modeId: spec.mode });
    }
    for (const prompt of spec.prompts) {
      const answer = await context.request("session/prompt", {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: prompt }],
      });
      report.stops.push(answer.stopReason);
    }
    await tools.dispose();
  });
} finally {
  server.close();
  agent.stdin.end();
}
await new Promise((resolve) => (agent.exitCode !== null ? resolve() : agent.on("exit", resolve)));
process.stdout.write(JSON.stringify(report) + "\n");
