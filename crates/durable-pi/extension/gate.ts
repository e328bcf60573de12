// durable-pi's gate: before a gated tool runs, ask the RPC client (the
// durable agent) whether it may, and wait for the answer.
//
// Pi loads this file with `-e`. The tools to gate come from
// DURABLE_PI_GATE_TOOLS (comma-separated; `*` gates every tool). The request
// is an `input` dialog titled `durable-pi:approval` whose placeholder is the
// call as JSON: {"toolCallId", "toolName", "input"}. The answer is JSON:
// {"allow": true} runs the call; {"allow": false, "reason": "…"} blocks it
// with that reason. Pi's abort signal goes with the dialog, so stopping the
// turn cancels it at once; a cancelled dialog blocks the call with
// DURABLE_PI_GATE_UNANSWERED as the reason.
const gated = (process.env.DURABLE_PI_GATE_TOOLS ?? "")
	.split(",")
	.map((name) => name.trim())
	.filter((name) => name.length > 0);

export default function (pi: any) {
	pi.on("tool_call", async (event: any, ctx: any) => {
		if (!gated.includes("*") && !gated.includes(event.toolName)) return undefined;
		const call = JSON.stringify({ toolCallId: event.toolCallId, toolName: event.toolName, input: event.input });
		const value = await ctx.ui.input("durable-pi:approval", call, { signal: ctx.signal });
		let answer: any;
		try {
			answer = JSON.parse(value ?? "");
		} catch {
			answer = undefined;
		}
		if (answer?.allow === true) return undefined;
		const reason = typeof answer?.reason === "string" ? answer.reason : process.env.DURABLE_PI_GATE_UNANSWERED ?? "";
		return { block: true, reason };
	});
}
