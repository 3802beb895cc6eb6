package config

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

func witnessVKey(t *testing.T, name string) string {
	t.Helper()
	_, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

// --witness URL=VKEY repeats; AUDITCHAIN_WITNESS and the file's witness key
// (an array, or a string) give a list, which a --witness on the command line
// replaces; the quorum defaults to every witness.
func TestWitnessesFromFlagsEnvironmentAndFile(t *testing.T) {
	a, b := witnessVKey(t, "w.example/a"), witnessVKey(t, "w.example/b")
	names := func(c Config) string {
		var out []string
		for _, w := range c.Witnesses {
			out = append(out, w.Name+"@"+w.URL)
		}
		return strings.Join(out, " ")
	}
	file := writeFile(t, `witness = ["https://a.example/w=`+a+`", "http://10.0.0.2:8080/=`+b+`"]`)
	for _, tc := range []struct {
		args   []string
		env    map[string]string
		want   string
		quorum int
	}{
		{args: []string{"--witness", "https://a.example/w?x=1=" + a}, want: "w.example/a@https://a.example/w?x=1", quorum: 1},
		{env: map[string]string{"AUDITCHAIN_WITNESS": "https://a.example=" + a + ", https://b.example=" + b}, want: "w.example/a@https://a.example w.example/b@https://b.example", quorum: 2},
		{args: []string{"--config", file}, want: "w.example/a@https://a.example/w w.example/b@http://10.0.0.2:8080", quorum: 2},
		{args: []string{"--config", file, "--witness", "https://c.example=" + b, "--witness-quorum", "1"}, want: "w.example/b@https://c.example", quorum: 1},
		{args: []string{"--config", file, "--witness-quorum", "1"}, want: "w.example/a@https://a.example/w w.example/b@http://10.0.0.2:8080", quorum: 1},
		{want: "", quorum: 0},
	} {
		c, err := Parse(tc.args, envOf(tc.env), &bytes.Buffer{})
		if err != nil || names(c) != tc.want || c.WitnessQuorum != tc.quorum {
			t.Errorf("%v %v: %q quorum %d, %v; want %q quorum %d", tc.args, tc.env, names(c), c.WitnessQuorum, err, tc.want, tc.quorum)
		}
	}
}

// A spec that is not URL=VKEY, a key that is not a verifier key, two keys
// of one name and a quorum outside 1..n are refused, naming what is wrong.
func TestWitnessesRefusedWhenWrong(t *testing.T) {
	a := witnessVKey(t, "w.example/a")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--witness", a}, "not URL=VKEY"},
		{[]string{"--witness", "ftp://a.example=" + a}, "not URL=VKEY"},
		{[]string{"--witness", "https://a.example=w.example/a+00000000+AAAA"}, "witness key"},
		{[]string{"--witness", "https://a.example=" + a, "--witness", "https://b.example=" + a}, `two witnesses named "w.example/a"`},
		{[]string{"--witness", "https://a.example=" + a, "--witness-quorum", "2"}, "--witness-quorum must be between 1 and the 1"},
		{[]string{"--witness-quorum", "1"}, "--witness-quorum needs at least one --witness"},
	} {
		_, err := Parse(tc.args, envOf(nil), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
