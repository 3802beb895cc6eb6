// Package hosttest runs the real agent hosts offline for tests: Claude Code,
// Codex CLI and Gemini CLI (the versions pinned in .ci/npm, found through
// internal/realprog) each talk to a scripted model server on 127.0.0.1, in a
// throwaway HOME and project, so a test decides from what the host actually
// did (files written, tool results sent back to the model) whether a hook
// gated it. Only tests import it.
//
// # Scripts
//
// A Server answers every model call that offers tools from a Responder; a
// Script is the usual one, the model's replies in order:
//
//	srv := hosttest.NewServer(t, hosttest.Script{
//		hosttest.Calls(hosttest.Claude.Shell("touch ran")),   // turn 1: one tool call
//		hosttest.Calls(hosttest.ToolCall("Read", map[string]string{"file_path": "/etc/hostname"})),
//		hosttest.Text("finished"),                            // ends the host's turn
//	})
//	s := hosttest.NewSession(t, hosttest.Claude, srv)
//	out := s.Run(t, "do it", "--allowedTools", "Bash")
//	res, _ := srv.Result(srv.Calls()[0].ID) // what the host sent back for the call
//
// The next reply is chosen by how many tool calls the conversation already
// holds, so retries and hosts that reshape their history get the same
// answer. Host.Shell builds the host's shell call; ToolCall any other (tool
// names are the host's: Claude's Read, Codex's apply_patch (freeform: pass
// the patch text as a string), Gemini's read_file, …). Give a call an ID to
// find it later, or read the ids the server gave from Server.Calls. ByPrompt
// runs one Script per conversation, chosen by a marker in its first user
// message: a sub-agent's conversation starts with the prompt its parent
// wrote, so a test can script the parent (a call of Claude's Agent tool with
// the marker in its prompt) and the sub-agent apart. A ResponderFunc can do
// anything else.
//
// Requests that offer no tools are the host's side requests (Gemini's model
// router and next-speaker check, titles); they get a fixed answer that ends
// them, valid against the JSON schema they ask for. Server.Requests keeps
// every request with its conversation normalized across the three APIs
// (Messages, Calls, Results), so a test reads the tool results, refusal
// reasons included, that reached the model. Server.Log summarizes them for
// failure messages. After MaxTurns model turns the server ends every turn,
// so a script that never ends fails fast instead of at the run's timeout.
//
// # Sessions
//
// NewSession installs a host in fresh directories (Session.Home, Session.Dir
// the project and working directory, Session.Config the host's user
// configuration) and Session.Run runs it once, headless, with a timeout,
// returning its exit code and output. The environment is built from scratch
// (only PATH is inherited), so CI variables such as GITHUB_SHA, which changes
// Gemini CLI's behaviour, never leak in. HTTP_PROXY and HTTPS_PROXY point at
// the server, which refuses and records anything meant for another host
// (Server.Proxied): no run reaches beyond loopback, and a test can assert
// that none tried. What each host needs, all set up by NewSession:
//
// Claude Code (claude -p PROMPT --output-format json): ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY; it calls POST /v1/messages?beta=true with stream set and
// nothing else. DISABLE_TELEMETRY, DISABLE_ERROR_REPORTING,
// DISABLE_AUTOUPDATER and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC keep it
// quiet; ~/.claude.json marks onboarding done. -p asks nothing: project
// settings (.claude/settings.json, hooks included) load without a trust
// prompt, and a tool runs only when the host's own rules allow it
// (--allowedTools Bash), whatever a hook answers.
//
// Codex CLI (codex exec --skip-git-repo-check -C DIR PROMPT): a custom model
// provider in $CODEX_HOME/config.toml (wire_api = "responses", base_url
// SERVER/v1, env_key naming the variable holding its key) with no request or
// stream retries, which would otherwise take five back-offs on any error;
// the model is one Codex knows (CodexModel), so it offers that model's tools
// (exec_command, apply_patch, …); no update check, no analytics, and plugins
// off, since the plugin sync runs git against github.com and calls
// chatgpt.com. Its sandbox is a flag of the run (-s; the tests use
// danger-full-access, workspace-write also works here). Hooks run only when
// trusted, by trust entries in config.toml or --dangerously-bypass-hook-trust;
// exec skips untrusted ones without a word. Add --json for its events as
// JSON lines on stdout.
//
// Gemini CLI (gemini --output-format json --prompt PROMPT):
// GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY, and security.auth.selectedType
// "gemini-api-key" in ~/.gemini/settings.json (the base URL alone selects
// the gateway auth, which -p refuses); usage statistics, telemetry and
// auto-update off; GEMINI_CLI_NO_RELAUNCH keeps it one process; system
// settings paths point into the throwaway tree. It calls
// :streamGenerateContent for its turns and :generateContent for its router.
// Without --approval-mode yolo (or --allowed-tools) -p does not offer the
// shell tool at all. Folder trust is left as installed: in an untrusted
// project -p exits 55; --skip-trust runs it but loads no project hooks,
// while user hooks (Session.Config/settings.json) still run. Project hooks
// need GEMINI_CLI_TRUST_WORKSPACE=true or a ~/.gemini/trustedFolders.json
// entry.
//
// A run takes one to four seconds; the tests run the hosts in parallel.
package hosttest
