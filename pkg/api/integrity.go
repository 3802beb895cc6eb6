package api

// Integrity (CONTRACT.md "Integrity", docs/integrity.md): hashes are
// standard base64, as in checkpoints and exports.

// Block is a signed checkpoint over the account's Merkle tree; Note is the
// C2SP signed note, verbatim, and BlockHash its SHA-256. Cosignatures are
// the witnesses' note signature lines on it ("— <name> <base64>", no
// newline; empty when none): Note plus each line and a newline is the
// cosigned note.
type Block struct {
	Index         int64    `json:"index"`
	TreeSize      int64    `json:"tree_size"`
	RootHash      string   `json:"root_hash"`
	BlockHash     string   `json:"block_hash"`
	PrevBlockHash *string  `json:"prev_block_hash"` // nil for block 0
	Note          string   `json:"note"`
	Cosignatures  []string `json:"cosignatures"`
	CreatedAt     string   `json:"created_at"`
}

// BlockPage answers GET /v1/chain/blocks: NextCursor continues it.
type BlockPage struct {
	Count        int     `json:"count"`
	Blocks       []Block `json:"blocks"`
	NextCursor   *int64  `json:"next_cursor"`
	Origin       string  `json:"origin"`
	ServiceKeyID string  `json:"service_key_id"`
	UserID       string  `json:"user_id"`
}

// ChainVerification answers GET /v1/chain/verify.
type ChainVerification struct {
	Valid         bool    `json:"valid"`
	Blocks        int64   `json:"blocks"`
	FirstBadBlock *int64  `json:"first_bad_block"`
	TreeSize      int64   `json:"tree_size"`
	Reason        *string `json:"reason"`
	Detail        *string `json:"detail"`
}

// InclusionProof answers GET /v1/chain/proof/inclusion: Proof is the audit
// path from LeafHash to RootHash; Checkpoint, when not nil, is the block of
// exactly TreeSize whose note signs RootHash.
type InclusionProof struct {
	EventID     string   `json:"event_id"`
	Sequence    int64    `json:"sequence"`
	LeafIndex   int64    `json:"leaf_index"`
	PayloadHash string   `json:"payload_hash"`
	LeafHash    string   `json:"leaf_hash"`
	TreeSize    int64    `json:"tree_size"`
	Proof       []string `json:"proof"`
	RootHash    string   `json:"root_hash"`
	Checkpoint  *Block   `json:"checkpoint"`
	Origin      string   `json:"origin"`
}

// ConsistencyProof answers GET /v1/chain/proof/consistency.
type ConsistencyProof struct {
	First            int64    `json:"first"`
	Second           int64    `json:"second"`
	Proof            []string `json:"proof"`
	FirstRoot        string   `json:"first_root"`
	SecondRoot       string   `json:"second_root"`
	FirstCheckpoint  *Block   `json:"first_checkpoint"`
	SecondCheckpoint *Block   `json:"second_checkpoint"`
	Origin           string   `json:"origin"`
}
