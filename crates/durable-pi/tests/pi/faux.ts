// A scripted model for Pi, so the tests need no network and no API key.
//
// Load it with `pi -e faux.ts --provider faux --model scripted` (or the slow
// provider `faux-slow`, which streams at FAUX_TOKENS_PER_SECOND tokens a
// second, 40 when unset). What the model answers depends on the last message:
//
// - a tool result: a reply that quotes the output ("The tool said: …"), or
//   "The tool failed: …" when the result is an error;
// - after a restart, durable-pi's "… has approved it now …": the last tool
//   call again (same tool, same arguments); "… has refused it …": a reply;
// - a user message containing "use bash": thinking, a short text and a `bash`
//   tool call (`stopReason: "toolUse"`); the command is what follows
//   "use bash:" on that line, else `echo hello from bash`;
// - "think": a thinking block, then the reply;
// - "long": a reply of a few hundred words (to stop or steer mid-stream);
// - anything else: "You said: <the text>".
// A summarization request (compaction, or a branch summary) gets
// "Summary: …" with the number of messages it summarized.
//
// Commands (send them as a prompt, e.g. `/note hello`):
// - /note TEXT    a custom message shown in the chat (custom_message, display)
//                 and a custom entry holding the extension's state (custom);
// - /hidden TEXT  a custom message that is not shown (display: false);
// - /goto ID      move the leaf to entry ID (the next prompt starts a branch);
// - /branch ID    the same, with a branch summary of the path left behind;
// - /label ID TEXT  a label on entry ID.
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

type Call = { type: string; name: string; arguments: Record<string, unknown> };

/// The last tool call the model made, from the conversation.
function lastToolCall(messages: Msg[]): Call | undefined {
	for (let i = messages.length - 1; i >= 0; i--) {
		const content = messages[i].content;
		if (messages[i].role !== "assistant" || typeof content === "string") continue;
		const calls = (content ?? []).filter((b) => b.type === "toolCall") as unknown as Call[];
		if (calls.length > 0) return calls[calls.length - 1];
	}
	return undefined;
}

const LONG = Array.from({ length: 300 }, (_, i) => `word${i + 1}`).join(" ");

function answer(context: { messages: Msg[] }) {
	const messages = context.messages ?? [];
	const whole = JSON.stringify(messages);
	if (whole.includes("context summarization assistant")) {
		return fauxAssistantMessage(`Summary: ${messages.length} messages so far.`);
	}
	const last = messages[messages.length - 1];
	if (last?.role === "toolResult") {
		const out = text(last.content).trim().split("\n")[0] ?? "";
		return fauxAssistantMessage(last.isError ? `The tool failed: ${out}` : `The tool said: ${out}`);
	}
	const said = last ? text(last.content) : "";
	const lower = said.toLowerCase();
	// durable-pi after a restart: a gated call approved now is made again,
	// the same tool with the same arguments; a refused one is not.
	if (lower.includes("has approved it now")) {
		const call = lastToolCall(messages);
		if (call) {
			return fauxAssistantMessage([fauxText("Running it again."), fauxToolCall(call.name, call.arguments)], {
				stopReason: "toolUse",
			});
		}
	}
	if (lower.includes("has refused it")) {
		return fauxAssistantMessage("Understood: I will not run it.");
	}
	if (lower.includes("use bash")) {
		const m = /use bash:\s*(.+)/i.exec(said);
		const command = m ? m[1].trim() : "echo hello from bash";
		return fauxAssistantMessage(
			[fauxThinking("The user wants a command run."), fauxText("Running it."), fauxToolCall("bash", { command })],
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

function provider(id: string, tokensPerSecond?: number) {
	const faux = fauxProvider({
		provider: id,
		api: `${id}-api`,
		models: [{ id: "scripted", name: "Scripted", reasoning: true }],
		tokensPerSecond,
	});
	// Each call takes one response off the queue: keep it full.
	const step = (context: { messages: Msg[] }) => {
		faux.appendResponses([step as never]);
		return answer(context);
	};
	faux.setResponses([step as never]);
	return faux.provider;
}

export default function (pi: any) {
	pi.registerProvider(provider("faux"));
	pi.registerProvider(provider("faux-slow", Number(process.env.FAUX_TOKENS_PER_SECOND ?? "40")));

	let notes = 0;
	pi.registerCommand("note", {
		description: "a shown custom message and a custom entry",
		handler: async (args: string) => {
			notes += 1;
			pi.sendMessage({ customType: "faux-note", content: args, display: true });
			pi.appendEntry("faux-state", { notes });
		},
	});
	pi.registerCommand("hidden", {
		description: "a custom message that is not shown",
		handler: async (args: string) => {
			pi.sendMessage({ customType: "faux-hidden", content: args, display: false });
		},
	});
	pi.registerCommand("goto", {
		description: "move the leaf to an entry",
		handler: async (args: string, ctx: any) => {
			await ctx.navigateTree(args.trim(), { summarize: false });
		},
	});
	pi.registerCommand("branch", {
		description: "move the leaf to an entry, with a branch summary",
		handler: async (args: string, ctx: any) => {
			await ctx.navigateTree(args.trim(), { summarize: true });
		},
	});
	pi.registerCommand("label", {
		description: "label an entry",
		handler: async (args: string) => {
			const [id, ...rest] = args.trim().split(/\s+/);
			pi.setLabel(id, rest.join(" "));
		},
	});
}
