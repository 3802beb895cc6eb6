package main

// `auditchain completion bash|zsh|fish`: completion scripts generated from
// the command table itself: the top-level commands are run's, a group's
// verbs are the ones group dispatches to, and each command's flags are the
// ones its --help lists, so a new verb or flag completes without an edit here.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
)

const completionUsage = `usage: auditchain completion bash|zsh|fish

Prints a completion script for the shell, made from this binary's commands,
verbs and flags. Load it with:
  bash:  source <(auditchain completion bash)        (or save it in /etc/bash_completion.d/)
  zsh:   source <(auditchain completion zsh)         (after compinit)
  fish:  auditchain completion fish | source         (or save it in ~/.config/fish/completions/auditchain.fish)
`

// subcommandsProbe, as a group's first argument, makes group answer its
// verbs (subcommandList) instead of running one. No command line can hold it.
const subcommandsProbe = "\x00subcommands"

// subcommandList is a group's verbs, answered to subcommandsProbe.
type subcommandList []string

func (subcommandList) Error() string { return "subcommand list" }

// nonGroupSubs are the subcommands of commands that dispatch them without
// group (they also run with no subcommand); TestCompletionCoversEveryVerb
// checks each is a command.
var nonGroupSubs = map[string][]string{
	"hook": {"doctor", "flush", "install", "uninstall"},
	"mcp":  {"proxy"},
}

// completionNode is a command: its flags and its subcommands.
type completionNode struct {
	path  []string
	flags []string
	subs  []*completionNode
}

var (
	defaultsFlagLine = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	usageFlag        = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
)

// commandTree probes the real commands: their verbs and the flags each
// --help lists.
func commandTree(ctx context.Context) *completionNode {
	quiet := func(string) string { return "" }
	probe := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := dispatch(ctx, args, quiet, &out, io.Discard)
		return out.String(), err
	}
	var build func(path []string) *completionNode
	build = func(path []string) *completionNode {
		n := &completionNode{path: path}
		var subs subcommandList
		if _, err := probe(append(slices.Clone(path), subcommandsProbe)...); !errors.As(err, &subs) {
			subs = nonGroupSubs[strings.Join(path, " ")]
			help, _ := probe(append(slices.Clone(path), "--help")...)
			n.flags = flagsOf(help)
		}
		for _, s := range subs {
			n.subs = append(n.subs, build(append(slices.Clone(path), s)))
		}
		return n
	}
	root := &completionNode{flags: []string{"help", "version"}}
	names := slices.Sorted(maps.Keys(commands(ctx, quiet, io.Discard, io.Discard)))
	for _, name := range names {
		root.subs = append(root.subs, build([]string{name}))
	}
	root.subs = append(root.subs, &completionNode{path: []string{"help"}})
	return root
}

// flagsOf is the flags a command's help lists: the flag package's defaults
// ("  -name type"), else the --names its usage text spells out.
func flagsOf(help string) []string {
	set := map[string]bool{"help": true}
	ms := defaultsFlagLine.FindAllStringSubmatch(help, -1)
	if len(ms) == 0 {
		ms = usageFlag.FindAllStringSubmatch(help, -1)
	}
	for _, m := range ms {
		set[m[1]] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func completionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("completion", completionUsage)
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		fmt.Fprint(stderr, completionUsage)
		return usagef("completion needs one shell: bash, zsh or fish")
	}
	if !slices.Contains([]string{"bash", "zsh", "fish"}, rest[0]) {
		fmt.Fprint(stderr, completionUsage)
		return usagef("completion: unknown shell %q (bash, zsh or fish)", rest[0])
	}
	// commandTree probes every command, this one too: it stops above.
	tree := commandTree(ctx)
	switch rest[0] {
	case "bash":
		_, err = io.WriteString(stdout, bashCompletion(tree))
	case "zsh":
		_, err = io.WriteString(stdout, "#compdef auditchain\nautoload -U +X bashcompinit && bashcompinit\n"+bashCompletion(tree))
	case "fish":
		_, err = io.WriteString(stdout, fishCompletion(tree))
	}
	return err
}

// walk visits every node, parents first.
func (n *completionNode) walk(f func(*completionNode)) {
	f(n)
	for _, s := range n.subs {
		s.walk(f)
	}
}

func (n *completionNode) subNames() []string {
	var names []string
	for _, s := range n.subs {
		names = append(names, s.path[len(s.path)-1])
	}
	return names
}

func dashed(flags []string) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "--" + f
	}
	return out
}

// bashCompletion is a bash (and, through bashcompinit, zsh) script: the
// words before the cursor that name commands select a case, whose words
// are its verbs and --flags.
func bashCompletion(tree *completionNode) string {
	var b strings.Builder
	b.WriteString(`# auditchain completion for bash (auditchain completion bash); generated from the binary's commands.
_auditchain() {
  local cur path="" w i
  cur="${COMP_WORDS[COMP_CWORD]}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    case "$w" in -*) continue ;; esac
    case "$path ${w}" in
`)
	var known []string
	tree.walk(func(n *completionNode) {
		if len(n.path) > 0 {
			known = append(known, "' "+strings.Join(n.path, " ")+"'")
		}
	})
	fmt.Fprintf(&b, "      %s) path=\"$path $w\" ;;\n", strings.Join(known, "|"))
	b.WriteString(`    esac
  done
  local words
  case "${path# }" in
`)
	tree.walk(func(n *completionNode) {
		words := append(n.subNames(), dashed(n.flags)...)
		fmt.Fprintf(&b, "    '%s') words='%s' ;;\n", strings.TrimPrefix(" "+strings.Join(n.path, " "), " ")+"", strings.Join(words, " "))
	})
	b.WriteString(`  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
  [ ${#COMPREPLY[@]} -eq 0 ] && case "$cur" in -*) ;; *) COMPREPLY=($(compgen -f -- "$cur")) ;; esac
  return 0
}
complete -F _auditchain auditchain
`)
	return b.String()
}

// fishCompletion is a fish script: one `complete` line per verb and flag,
// conditioned on the words already typed.
func fishCompletion(tree *completionNode) string {
	var b strings.Builder
	b.WriteString("# auditchain completion for fish (auditchain completion fish); generated from the binary's commands.\n")
	b.WriteString("function __auditchain_path\n  set -l words (commandline -opc)\n  set -l path\n  for w in $words[2..-1]\n    string match -q -- '-*' $w; and continue\n    set -a path $w\n  end\n  echo (string join ' ' $path)\nend\n")
	tree.walk(func(n *completionNode) {
		cond := fmt.Sprintf("test (__auditchain_path) = '%s'", strings.Join(n.path, " "))
		for _, s := range n.subNames() {
			fmt.Fprintf(&b, "complete -c auditchain -f -n \"%s\" -a %s\n", cond, s)
		}
		for _, f := range n.flags {
			fmt.Fprintf(&b, "complete -c auditchain -n \"%s\" -l %s\n", cond, f)
		}
	})
	return b.String()
}
