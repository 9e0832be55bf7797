package parley

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/store"
)

// Blobs live under b/: not a projection (Rebuild keeps them) and not local
// (they travel by CID).
var pfxBlob = []byte("b/img/")

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
	k := key(pfxBlob, c.Bytes())
	if _, err := tx.Get(k); err == nil {
		return nil // content-addressed: already held
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return tx.Set(k, append([]byte(img.data.MediaType+"\n"), img.bytes...))
}

// ImageHandler serves uploaded images by CID at /api/v1/images/{cid}.
func (s *Service) ImageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		var val []byte
		err = s.st.View(func(tx *store.Tx) error {
			v, err := tx.Get(key(pfxBlob, c.Bytes()))
			val = v
			return err
		})
		if errors.Is(err, store.ErrNotFound) && s.cfg.FetchImage != nil {
			val, err = s.fetchImage(r.Context(), c)
		}
		if err != nil {
			notFound()
			return
		}
		mt, body, _ := strings.Cut(string(val), "\n")
		w.Header().Set("Content-Type", mt)
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("ETag", `"`+c.String()+`"`)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'none'")
		w.Write([]byte(body))
	})
}

// Blob returns the bytes of the image whose CID is c, for peers.
func (s *Service) Blob(c []byte) ([]byte, bool) {
	var val []byte
	err := s.st.View(func(tx *store.Tx) error {
		v, err := tx.Get(key(pfxBlob, c))
		val = v
		return err
	})
	if err != nil {
		return nil, false
	}
	_, body, _ := strings.Cut(string(val), "\n")
	return []byte(body), true
}

// fetchImage gets an image of a replicated message from a peer, checks it
// as an upload is checked, and keeps it.
func (s *Service) fetchImage(ctx context.Context, c cid.Cid) ([]byte, error) {
	raw, err := s.cfg.FetchImage(ctx, c)
	if err != nil {
		return nil, err
	}
	if !protocol.BlobCID(raw).Equals(c) || len(raw) > s.cfg.Limits.ImageBytes {
		return nil, errors.New("parley: a peer sent another image")
	}
	mt := http.DetectContentType(raw)
	if !imageTypes[mt] {
		return nil, errors.New("parley: a peer sent a blob that is not an image")
	}
	img := &preparedImage{data: imageData{CID: c.String(), MediaType: mt, Bytes: len(raw)}, bytes: raw}
	if _, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) { return nil, s.storeImage(tx, img) }); err != nil {
		return nil, err
	}
	return append([]byte(mt+"\n"), raw...), nil
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
		mt, body, ok := bytes.Cut(v, []byte("\n"))
		if !ok {
			return fmt.Errorf("parley: blob %s has no media type", c)
		}
		return fn(Blob{CID: c, MediaType: string(mt), Data: body})
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
	k := key(pfxBlob, b.CID.Bytes())
	if _, err := tx.Get(k); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return tx.Set(k, append([]byte(b.MediaType+"\n"), b.Data...))
}
