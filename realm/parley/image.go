package parley

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/store"
)

// Blobs live under b/: not a projection (Rebuild keeps them) and not local
// (they travel by CID). b/img/<cid> holds the media type, a newline and the
// bytes; a blob over blobPart bytes holds no bytes there but in parts of
// blobPart bytes under b/imgp/<cid><part 4 BE>. Every value then stays far
// below Badger's value-log threshold (1 MiB): images live in the LSM tree
// with everything else, whose compactions reclaim space, and the store
// never needs value-log garbage collection, which it does not run. A real
// image is never empty, so empty bytes mean parts.
var (
	pfxBlob     = []byte("b/img/")
	pfxBlobPart = []byte("b/imgp/")
)

const blobPart = 256 << 10

// putBlob stores a blob under CID c.
func putBlob(tx *store.Tx, c []byte, mediaType string, data []byte) error {
	head := []byte(mediaType + "\n")
	if len(data) <= blobPart {
		return tx.Set(key(pfxBlob, c), append(head, data...))
	}
	if err := tx.Set(key(pfxBlob, c), head); err != nil {
		return err
	}
	for i := 0; len(data) > 0; i++ {
		n := min(len(data), blobPart)
		if err := tx.Set(key(pfxBlobPart, c, binary.BigEndian.AppendUint32(nil, uint32(i))), data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// getBlob reads the blob stored under CID c (store.ErrNotFound if none).
func getBlob(tx *store.Tx, c []byte) (mediaType string, data []byte, err error) {
	v, err := tx.Get(key(pfxBlob, c))
	if err != nil {
		return "", nil, err
	}
	return blobValue(tx, c, v)
}

// blobValue completes a b/img/ value with its parts, if it has any.
func blobValue(tx *store.Tx, c, v []byte) (mediaType string, data []byte, err error) {
	mt, body, ok := bytes.Cut(v, []byte("\n"))
	if !ok {
		return "", nil, fmt.Errorf("parley: blob %x has no media type", c)
	}
	if len(body) > 0 {
		return string(mt), body, nil
	}
	err = tx.Iterate(key(pfxBlobPart, c), false, func(_, part []byte) error {
		data = append(data, part...)
		return nil
	})
	if err == nil && len(data) == 0 {
		err = fmt.Errorf("parley: blob %x has no bytes", c)
	}
	return string(mt), data, err
}

type preparedImage struct {
	data  imageData
	bytes []byte
}

var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// prepareImage checks an envelope's image before the write: a URL passes as
// it is (Validate checked it); an upload is decoded, sized and sniffed.
func (s *Service) prepareImage(in *protocol.ImageInput) (*preparedImage, error) {
	if in == nil {
		return nil, nil
	}
	if in.URL != "" {
		return &preparedImage{data: imageData{URL: in.URL}}, nil
	}
	data := in.Data
	if rest, ok := strings.CutPrefix(data, "data:"); ok { // a data: URL
		if _, b64, ok := strings.Cut(rest, ";base64,"); ok {
			data = b64
		}
	}
	max := s.cfg.Limits.ImageBytes
	if base64.StdEncoding.DecodedLen(len(data)) > max+3 {
		return nil, protocol.Refusef(protocol.ReasonImageTooLarge, "The image is over %d bytes.", max)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(data); err != nil {
			return nil, protocol.Refusef(protocol.ReasonInvalidBody, "image.data is not base64.").With("field", "image.data").With("rule", "format")
		}
	}
	if len(raw) == 0 {
		return nil, protocol.Refusef(protocol.ReasonImageMissing, "image.data is empty.").With("field", "image.data")
	}
	if len(raw) > max {
		return nil, protocol.Refusef(protocol.ReasonImageTooLarge, "The image is %d bytes, over %d.", len(raw), max)
	}
	mt := http.DetectContentType(raw)
	if !imageTypes[mt] {
		return nil, protocol.Refusef(protocol.ReasonImageType, "The image is %s, not PNG, JPEG, WebP or GIF.", mt)
	}
	c := protocol.BlobCID(raw)
	return &preparedImage{data: imageData{CID: c.String(), MediaType: mt, Bytes: len(raw)}, bytes: raw}, nil
}

func (s *Service) storeImage(tx *store.Tx, img *preparedImage) error {
	if img.bytes == nil {
		return nil
	}
	c, _ := protocol.ParseBlobCID(img.data.CID)
	if _, err := tx.Get(key(pfxBlob, c.Bytes())); err == nil {
		return nil // content-addressed: already held
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return putBlob(tx, c.Bytes(), img.data.MediaType, img.bytes)
}

// ImageHandler serves uploaded images by CID at /api/v1/images/{cid}.
func (s *Service) ImageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		notFound := func() {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"reason":"not_found","error":"No such image."}` + "\n"))
		}
		c, err := protocol.ParseBlobCID(r.PathValue("cid"))
		if err != nil {
			notFound()
			return
		}
		var mt string
		var body []byte
		err = s.st.View(func(tx *store.Tx) error {
			mt, body, err = getBlob(tx, c.Bytes())
			return err
		})
		if errors.Is(err, store.ErrNotFound) && s.cfg.FetchImage != nil {
			mt, body, err = s.fetchImage(r.Context(), c)
		}
		if err != nil {
			notFound()
			return
		}
		w.Header().Set("Content-Type", mt)
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("ETag", ImageETag(c))
		w.Header().Set("Content-Security-Policy", "default-src 'none'")
		w.Write(body)
	})
}

// ImageETag is the entity tag of the image whose CID is c: its CID, since
// its bytes never change.
func ImageETag(c cid.Cid) string { return `"` + c.String() + `"` }

// HasImage reports whether the image whose CID is c is held here.
func (s *Service) HasImage(c cid.Cid) bool {
	return s.st.View(func(tx *store.Tx) error {
		_, err := tx.Get(key(pfxBlob, c.Bytes()))
		return err
	}) == nil
}

// Blob returns the bytes of the image whose CID is c, for peers.
func (s *Service) Blob(c []byte) ([]byte, bool) {
	var body []byte
	err := s.st.View(func(tx *store.Tx) error {
		var err error
		_, body, err = getBlob(tx, c)
		return err
	})
	if err != nil {
		return nil, false
	}
	return body, true
}

// fetchImage gets an image of a replicated message from a peer, checks it
// as an upload is checked, and keeps it.
func (s *Service) fetchImage(ctx context.Context, c cid.Cid) (mediaType string, data []byte, err error) {
	raw, err := s.cfg.FetchImage(ctx, c)
	if err != nil {
		return "", nil, err
	}
	if !protocol.BlobCID(raw).Equals(c) || len(raw) > s.cfg.Limits.ImageBytes {
		return "", nil, errors.New("parley: a peer sent another image")
	}
	mt := http.DetectContentType(raw)
	if !imageTypes[mt] {
		return "", nil, errors.New("parley: a peer sent a blob that is not an image")
	}
	img := &preparedImage{data: imageData{CID: c.String(), MediaType: mt, Bytes: len(raw)}, bytes: raw}
	if _, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) { return nil, s.storeImage(tx, img) }); err != nil {
		return "", nil, err
	}
	return mt, raw, nil
}

// Blob is a stored upload as it travels outside the node (an export): its
// CID, media type and bytes.
type Blob struct {
	CID       cid.Cid
	MediaType string
	Data      []byte
}

// EachBlob calls fn for every blob tx sees, in CID order.
func EachBlob(tx *store.Tx, fn func(Blob) error) error {
	return tx.Iterate(pfxBlob, false, func(k, v []byte) error {
		c, err := cid.Cast(k[len(pfxBlob):])
		if err != nil {
			return fmt.Errorf("parley: blob key %q: %w", k, err)
		}
		mt, body, err := blobValue(tx, c.Bytes(), v)
		if err != nil {
			return err
		}
		return fn(Blob{CID: c, MediaType: mt, Data: body})
	})
}

// PutBlob stores a blob that comes from outside the node (an import). Its
// CID must be that of its bytes and its media type one an upload may have;
// a blob already held is left as it is.
func PutBlob(tx *store.Tx, b Blob) error {
	if !protocol.BlobCID(b.Data).Equals(b.CID) {
		return fmt.Errorf("parley: blob bytes do not hash to %s", b.CID)
	}
	if !imageTypes[b.MediaType] {
		return fmt.Errorf("parley: blob %s: media type %q is not an image type", b.CID, b.MediaType)
	}
	if _, err := tx.Get(key(pfxBlob, b.CID.Bytes())); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return putBlob(tx, b.CID.Bytes(), b.MediaType, b.Data)
}
