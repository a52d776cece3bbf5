// Command tlogcheck verifies the gateway's transparency log with an
// implementation this project did not write: Go's golang.org/x/mod/sumdb/tlog
// and sumdb/note (Debian's golang-golang-x-mod-dev, GOPATH=/usr/share/gocode,
// no network beyond the loopback gateway).
//
// Usage: tlogcheck <log prefix URL> <checkpoint vkey> <proofs.json>
//
//	tlogcheck cosig <checkpoint vkey> <witness vkey> <checkpoint file>
//
// It opens the checkpoint with note.Open, reads every tile through
// tlog.TileHashReader (which authenticates each tile against the checkpoint's
// root), recomputes the root with tlog.TreeHash, checks that every entry of
// every bundle hashes (tlog.RecordHash) to its level-0 tile hash, and checks
// each inclusion and consistency proof in proofs.json with tlog.CheckRecord /
// tlog.CheckTree, comparing them with tlog.ProveRecord / tlog.ProveTree.
//
// The cosig mode checks a witness cosignature (C2SP tlog-cosignature,
// cosignature/v1, signature type 0x04) on a served checkpoint. No package
// installable here (Debian bookworm, npm) implements cosignature/v1, and
// x/mod 0.7.0's sumdb/note knows only type 0x01 keys. So the note itself is
// parsed and its signature lines matched to keys by sumdb/note's note.Open,
// and the cosignature is checked by a note.Verifier written here from the
// C2SP text (key ID = SHA-256(name ‖ 0x0A ‖ 0x04 ‖ key)[:4]; signed message
// "cosignature/v1\ntime <t>\n" ‖ note text; signature = 8-byte big-endian t ‖
// Ed25519) with Go's crypto/ed25519: another language, another Ed25519 and
// another reading of the spec than ours, but the message construction is
// still written by this project.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Entry     string   `json:"entry"`
	LeafIndex int64    `json:"leaf_index"`
	TreeSize  int64    `json:"tree_size"`
	Proof     []string `json:"inclusion_proof"`
}

type consistency struct {
	From  int64    `json:"from"`
	To    int64    `json:"to"`
	Proof []string `json:"proof"`
}

type proofs struct {
	Inclusions    []inclusion   `json:"inclusions"`
	Consistency   []consistency `json:"consistency"`
	OldCheckpoint string        `json:"old_checkpoint"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "FAIL "+format+"\n", args...)
	os.Exit(1)
}

func get(url string) []byte {
	resp, err := http.Get(url)
	if err != nil {
		fail("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		fail("GET %s: status %d %v", url, resp.StatusCode, err)
	}
	return body
}

type tileReader struct{ prefix string }

func (r *tileReader) Height() int { return 8 }

// C2SP paths are Go's tile paths without the height element: tile/8/L/N → tile/L/N.
func c2spPath(t tlog.Tile) string {
	return "tile/" + strings.TrimPrefix(t.Path(), "tile/8/")
}

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		out[i] = get(r.prefix + "/" + c2spPath(t))
	}
	return out, nil
}

func (r *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func hashOf(s string) tlog.Hash {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		fail("bad hash %q", s)
	}
	var h tlog.Hash
	copy(h[:], b)
	return h
}

// parseCheckpoint opens a signed checkpoint note with the vkey and returns its tree.
func parseCheckpoint(text []byte, verifier note.Verifier, origin string) tlog.Tree {
	n, err := note.Open(text, note.VerifierList(verifier))
	if err != nil {
		fail("note.Open: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[0] != origin {
		fail("checkpoint origin %q, want %q", lines[0], origin)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size: %v", err)
	}
	return tlog.Tree{N: size, Hash: hashOf(lines[2])}
}

// cosigV1 is a note.Verifier for a C2SP cosignature/v1 (type 0x04) key.
type cosigV1 struct {
	name string
	hash uint32
	key  ed25519.PublicKey
	time uint64
}

func (v *cosigV1) Name() string    { return v.name }
func (v *cosigV1) KeyHash() uint32 { return v.hash }
func (v *cosigV1) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	signed := []byte(fmt.Sprintf("cosignature/v1\ntime %d\n%s", t, msg))
	if !ed25519.Verify(v.key, signed, sig[8:]) {
		return false
	}
	v.time = t
	return true
}

// parseCosigVkey reads "<name>+<hex key ID>+<base64(0x04 ‖ key)>" and checks the key ID.
func parseCosigVkey(vkey string) *cosigV1 {
	parts := strings.Split(vkey, "+")
	if len(parts) != 3 {
		fail("witness vkey %q: want name+hash+key", vkey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 0x04 {
		fail("witness vkey: not a type 0x04 Ed25519 key")
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	if hex.EncodeToString(h[:4]) != parts[1] {
		fail("witness vkey: key ID %s, want %x", parts[1], h[:4])
	}
	return &cosigV1{name: parts[0], hash: binary.BigEndian.Uint32(h[:4]), key: ed25519.PublicKey(raw[1:])}
}

func cosigMain(logVkey, witnessVkey, file string) {
	logV, err := note.NewVerifier(logVkey)
	if err != nil {
		fail("note.NewVerifier: %v", err)
	}
	w := parseCosigVkey(witnessVkey)
	text, err := os.ReadFile(file)
	if err != nil {
		fail("read checkpoint: %v", err)
	}
	n, err := note.Open(text, note.VerifierList(logV, w))
	if err != nil {
		fail("note.Open: %v", err)
	}
	var logSigned, cosigned bool
	for _, s := range n.Sigs {
		logSigned = logSigned || (s.Name == logV.Name() && s.Hash == logV.KeyHash())
		cosigned = cosigned || (s.Name == w.name && s.Hash == w.hash)
	}
	if !logSigned || !cosigned {
		fail("checkpoint signed by the log: %v, cosigned by %s: %v", logSigned, w.name, cosigned)
	}
	lines := bytes.Split([]byte(n.Text), []byte("\n"))
	fmt.Printf("cosignature: %s cosigned %s size %s at time %d (note.Open, crypto/ed25519)\n", w.name, lines[0], lines[1], w.time)
	fmt.Println("OK")
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == "cosig" {
		cosigMain(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	if len(os.Args) != 4 {
		fail("usage: tlogcheck <prefix> <vkey> <proofs.json>")
	}
	prefix, vkey := strings.TrimRight(os.Args[1], "/"), os.Args[2]
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		fail("note.NewVerifier: %v", err)
	}
	origin := verifier.Name()
	tree := parseCheckpoint(get(prefix+"/checkpoint"), verifier, origin)
	fmt.Printf("checkpoint: %s size %d root %s (note signature verified by sumdb/note)\n", origin, tree.N, tree.Hash)
	if tree.N == 0 {
		// sumdb's tlog.TreeHash(0) is the zero hash; C2SP tlog-checkpoint (RFC 6962) names
		// SHA-256 of the empty string as the empty tree's root. There are no tiles to read.
		if tree.Hash != tlog.Hash(sha256.Sum256(nil)) {
			fail("the empty tree's root is %s, not SHA-256 of the empty string", tree.Hash)
		}
		fmt.Println("empty tree: root is SHA-256 of the empty string")
		fmt.Println("OK")
		return
	}

	hr := tlog.TileHashReader(tree, &tileReader{prefix})
	root, err := tlog.TreeHash(tree.N, hr)
	if err != nil || root != tree.Hash {
		fail("tlog.TreeHash over the tiles: %v %s != %s", err, root, tree.Hash)
	}
	fmt.Printf("tiles: every tile authenticated against the root by tlog.TileHashReader; TreeHash matches\n")

	// Entry bundles: each entry's RecordHash is its level-0 hash.
	checked := int64(0)
	for b := int64(0); b*256 < tree.N; b++ {
		w := tree.N - b*256
		path := tlog.Tile{H: 8, L: 0, N: b, W: 256}
		if w < 256 {
			path.W = int(w)
		} else {
			w = 256
		}
		data := get(prefix + "/tile/entries/" + strings.TrimPrefix(c2spPath(path), "tile/0/"))
		for i := int64(0); i < w; i++ {
			if len(data) < 2 {
				fail("bundle %d truncated at entry %d", b, i)
			}
			n := int(data[0])<<8 | int(data[1])
			entry := data[2 : 2+n]
			data = data[2+n:]
			hs, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, b*256+i)})
			if err != nil || hs[0] != tlog.RecordHash(entry) {
				fail("entry %d does not hash to its tile hash: %v", b*256+i, err)
			}
			checked++
		}
		if len(data) != 0 {
			fail("bundle %d has trailing bytes", b)
		}
	}
	fmt.Printf("entries: %d entries hash (tlog.RecordHash) to their level-0 tile hashes\n", checked)

	raw, err := os.ReadFile(os.Args[3])
	if err != nil {
		fail("read proofs: %v", err)
	}
	var ps proofs
	if err := json.Unmarshal(raw, &ps); err != nil {
		fail("proofs.json: %v", err)
	}
	for _, inc := range ps.Inclusions {
		entry, err := base64.StdEncoding.DecodeString(inc.Entry)
		if err != nil {
			fail("entry base64: %v", err)
		}
		th, err := tlog.TreeHash(inc.TreeSize, hr)
		if err != nil {
			fail("TreeHash(%d): %v", inc.TreeSize, err)
		}
		var p tlog.RecordProof
		for _, s := range inc.Proof {
			p = append(p, hashOf(s))
		}
		if err := tlog.CheckRecord(p, inc.TreeSize, th, inc.LeafIndex, tlog.RecordHash(entry)); err != nil {
			fail("CheckRecord leaf %d size %d: %v", inc.LeafIndex, inc.TreeSize, err)
		}
		mine, err := tlog.ProveRecord(inc.TreeSize, inc.LeafIndex, hr)
		if err != nil || len(mine) != len(p) {
			fail("ProveRecord differs: %v", err)
		}
		for i := range mine {
			if mine[i] != p[i] {
				fail("ProveRecord differs at %d", i)
			}
		}
	}
	fmt.Printf("inclusion: %d proofs pass tlog.CheckRecord and equal tlog.ProveRecord\n", len(ps.Inclusions))
	for _, c := range ps.Consistency {
		var p tlog.TreeProof
		for _, s := range c.Proof {
			p = append(p, hashOf(s))
		}
		from, err1 := tlog.TreeHash(c.From, hr)
		to, err2 := tlog.TreeHash(c.To, hr)
		if err1 != nil || err2 != nil {
			fail("TreeHash: %v %v", err1, err2)
		}
		if c.From > 0 {
			if err := tlog.CheckTree(p, c.To, to, c.From, from); err != nil {
				fail("CheckTree %d→%d: %v", c.From, c.To, err)
			}
			mine, err := tlog.ProveTree(c.To, c.From, hr)
			if err != nil || len(mine) != len(p) {
				fail("ProveTree %d→%d differs: %v", c.From, c.To, err)
			}
			for i := range mine {
				if mine[i] != p[i] {
					fail("ProveTree differs at %d", i)
				}
			}
		} else if len(p) != 0 {
			fail("a proof from the empty tree must be empty")
		}
	}
	fmt.Printf("consistency: %d proofs pass tlog.CheckTree and equal tlog.ProveTree\n", len(ps.Consistency))
	if ps.OldCheckpoint != "" {
		old := parseCheckpoint([]byte(ps.OldCheckpoint), verifier, origin)
		h, err := tlog.TreeHash(old.N, hr)
		if err != nil || h != old.Hash {
			fail("the older checkpoint's root is not the current tree's prefix root")
		}
		fmt.Printf("older checkpoint (size %d): note verified, its root is the prefix of the current tree\n", old.N)
	}
	fmt.Println("OK")
}
