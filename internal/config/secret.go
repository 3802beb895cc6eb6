package config

import "flag"

// SecretVar defines the string flag name, stored in *p and starting at value,
// for a value that may carry a credential: an API key, a shared secret, a URL
// with a password in it (--db, --mail, --cron-secret, --anchor-tsa-url, the
// client's --api-key and --url). It is the one rule that keeps them out of
// help and usage (docs/decisions/secrets.md): the help shows builtin, the
// program's own default and never a credential, when the value is that
// default; "(set)" when it is another, from the environment; nothing when
// it is empty. Setting it never fails, so the flag package never quotes it
// in an error either.
func SecretVar(fs *flag.FlagSet, p *string, name, value, builtin, usage string) {
	*p = value
	if value != "" && value != builtin {
		usage += " (set)"
	}
	fs.Var(&secretValue{p: p, builtin: builtin}, name, usage)
}

// secretValue is a flag.Value whose String, the only thing the flag package
// prints of a value, is the built-in default or nothing.
type secretValue struct {
	p       *string
	builtin string
}

func (s *secretValue) Set(v string) error { *s.p = v; return nil }

// String is "" unless the value is the built-in default. The flag package
// also calls it on a zero secretValue (to tell a default from the zero
// value), hence the nil checks.
func (s *secretValue) String() string {
	if s == nil || s.p == nil || *s.p != s.builtin {
		return ""
	}
	return s.builtin
}
