// A scripted model and a tool gate for Pi behind pi-acp, so durable-acp's
// tests drive the real Pi with no network and no API key.
//
// `cargo xtask install-pi` writes `.tools/bin/pi-faux`, which runs Pi with
// `-e <this file> --provider faux --model faux-1` (PI_FAUX_EXTENSION names
// another file). FAUX_TOKENS_PER_SECOND, when set, streams the replies at
// that rate (to stop a turn mid-stream); unset, they come at once.
//
// What the model answers depends on the last message:
// - a tool result: "The tool said: <its first line>", or "The tool failed:
//   <its first line>" when the result is an error;
// - a user message with "use bash": a thought, "Running it." and a `bash`
//   call whose command is what follows "use bash:" on that line (else
//   `echo hello from bash`);
// - "think": a thought, then "Done thinking.";
// - "long": three hundred words ("word1 … word300");
// - anything else: "You said: <the text>".
//
// The gate: before `bash`, `write` or `edit` runs, Pi asks its client with a
// select dialog titled "<tool>: <command or path> (<tool call id>)" whose
// options are Allow and Deny; pi-acp turns it into a
// `session/request_permission`. Allow runs the call; anything else blocks it
// ("Denied by the user."). Pi's abort signal goes with the dialog, so a
// cancel ends the turn at once even while it is open.
import { fauxAssistantMessage, fauxProvider, fauxText, fauxThinking, fauxToolCall } from "@earendil-works/pi-ai";

type Block = { type: string; text?: string };
type Msg = { role: string; content?: string | Block[]; isError?: boolean };

function text(content: Msg["content"]): string {
	if (typeof content === "string") return content;
	return (content ?? [])
		.filter((b) => b.type === "text")
		.map((b) => b.text ?? "")
		.join("\n");
}

const LONG = Array.from({ length: 300 }, (_, i) => `word${i + 1}`).join(" ");

function answer(context: { messages: Msg[] }) {
	const messages = context.messages ?? [];
	const last = messages[messages.length - 1];
	if (last?.role === "toolResult") {
		const out = text(last.content).trim().split("\n")[0] ?? "";
		return fauxAssistantMessage(last.isError ? `The tool failed: ${out}` : `The tool said: ${out}`);
	}
	const said = last ? text(last.content) : "";
	const lower = said.toLowerCase();
	if (lower.includes("use bash")) {
		const m = /use bash:\s*(.+)/i.exec(said);
		const command = m ? m[1].trim() : "echo hello from bash";
		// An id unique in the session: the conversation only grows.
		const id = `call_${messages.length}`;
		return fauxAssistantMessage(
			[fauxThinking("The user wants a command run."), fauxText("Running it."), fauxToolCall("bash", { command }, { id })],
			{ stopReason: "toolUse" },
		);
	}
	if (lower.includes("think")) {
		return fauxAssistantMessage([fauxThinking(`Thinking about: ${said}`), fauxText("Done thinking.")]);
	}
	if (lower.includes("long")) {
		return fauxAssistantMessage(LONG);
	}
	return fauxAssistantMessage(`You said: ${said}`);
}

function provider() {
	const rate = Number(process.env.FAUX_TOKENS_PER_SECOND ?? "");
	const faux = fauxProvider({
		provider: "faux",
		api: "faux-api",
		models: [{ id: "faux-1", name: "Scripted", reasoning: true }],
		tokensPerSecond: rate > 0 ? rate : undefined,
	});
	// Each call takes one response off the queue: keep it full.
	const step = (context: { messages: Msg[] }) => {
		faux.appendResponses([step as never]);
		return answer(context);
	};
	faux.setResponses([step as never]);
	return faux.provider;
}

const GATED = ["bash", "write", "edit"];

export default function (pi: any) {
	pi.registerProvider(provider());
	pi.on("tool_call", async (event: any, ctx: any) => {
		if (!GATED.includes(event.toolName)) return undefined;
		const what = event.input?.command ?? event.input?.path ?? JSON.stringify(event.input);
		const title = `${event.toolName}: ${what} (${event.toolCallId})`;
		const choice = await ctx.ui.select(title, ["Allow", "Deny"], { signal: ctx.signal });
		if (choice === "Allow") return undefined;
		return { block: true, reason: "Denied by the user." };
	});
}
