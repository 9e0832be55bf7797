// Package backup is the export file of `relay export` and `relay import`: a
// verifiable copy of a node's event log (every realm's chain it holds, with
// the blobs its events name), its writer, and a reader that checks every
// byte before handing anything on.
//
// # Format (version 1)
//
// A file is Magic, the format version as a uvarint, then frames. It may be
// gzip-compressed as a whole; Read recognises gzip by its own magic. A frame
// is
//
//	kind (1 byte) ‖ length (uvarint) ‖ payload (length bytes) ‖ CRC-32C (4 bytes, big-endian)
//
// where the CRC covers the kind byte and the payload. Every kind has a
// maximum length (MaxFrame), checked before anything is allocated: the file
// is untrusted input. Payloads other than events are canonical DAG-CBOR maps
// (the types below). Frames come in this order, each kind only where shown:
//
//	'H' Header        once, first: origin realm, created at, events to come
//	'K' RealmKey      one per realm whose events follow: its ed25519 public key
//	                  and, for realms other than the origin, the signed
//	                  descriptor the exporting node's directory pinned
//	'S' Secret        at most one, only with `relay export --with-key`: the
//	                  origin realm's private key (libp2p protobuf form)
//	'E' event         the raw signed event as stored, in the node's arrival
//	                  order (corpus sequence): every realm's chain in seq order
//	'B' Blob          a blob (an image) with its CID and media type
//	'Z' Trailer       once, last: counts and every realm's head; then EOF
//
// # What reading checks
//
// Frame lengths, CRCs, order and counts; for every event the canonical
// encoding, its CID (recomputed from the bytes) and that it extends its
// realm's chain (seq dense from 1, prev the CID of the event before); the
// signature, against the realm's key from the file, of every realm's newest
// event in each chunk of up to 512 events, which through those hash links
// authenticates every event before it (Options.VerifyAll checks every
// signature, at about a quarter more CPU);
// every blob's CID against its bytes; at the end, that the trailer's heads
// are the chains' heads, so a file cut short, even at a frame boundary, is
// refused. A key the caller already knows for a realm (Options.Known) must be
// the file's; a descriptor must verify under its own key, which must be its
// realm's key in the file.
//
// # Tricky bits
//
//   - The keys in a file authenticate chains only relative to those keys: the
//     importer decides whether to trust them (the origin realm's key is
//     checked against the private key it restores as; remote realms' keys
//     against the realm directory once there is one). An import pins the
//     descriptors the file carries in the new node's directory, so a key
//     the exporting node had pinned for a realm stays pinned.
//   - Events keep the node's arrival order, not one realm after another, so a
//     restored node assigns every event the same corpus sequence it had and
//     sync cursors (changes.jsonl, SSE ids) stay valid.
//   - Read decodes and verifies in worker goroutines but hands chunks to the
//     sink strictly in file order, each only once all of it has verified;
//     the chain links are checked on the sink's goroutine, in order.
package backup
