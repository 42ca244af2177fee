// The agent's stdio stream (`ndJsonStream`) with every frame handed to `record(direction,
// frame)` as it crosses the pipe, both ways and in order, before the SDK parses it
// ("in": from the agent, "out": to it): the e2e tests check the agent's frames against the
// schema. Shared by v2_client.mjs and mcp_over_acp_client.mjs.

export function recordedWire(wire, record) {
  const tee = (direction) =>
    new TransformStream({
      transform(frame, controller) {
        record(direction, frame);
        controller.enqueue(frame);
      },
    });
  const outgoing = tee("out");
  outgoing.readable.pipeTo(wire.writable);
  return { readable: wire.readable.pipeThrough(tee("in")), writable: outgoing.writable };
}
