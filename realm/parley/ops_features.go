package parley

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// Feature is a request for a new tool.
type Feature struct {
	ID        uint64    `json:"id"`
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	Status    string    `json:"status" jsonschema:"open, accepted, planned, done or rejected"`
	Requester string    `json:"requester"`
	Extension string    `json:"extension,omitempty"`
	Note      string    `json:"note,omitempty"`
	DecidedBy string    `json:"decided_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FeatureStatus is a state of a feature request, as a decision or a filter
// names it.
type FeatureStatus string

// FeatureStatuses are the states of a feature request.
var FeatureStatuses = []FeatureStatus{"open", "accepted", "planned", "done", "rejected"}

// The decision and the filter list the states in their input schemas; a
// feature request as stored is a plain string, so that a record stays valid
// if the set grows.
var _ = api.InputEnum(FeatureStatuses)

func (s *Service) registerFeatures(reg *api.Registry) {
	reg.Add(
		withExtension(api.Define("post_features", http.MethodPost, "/api/v1/features", "Request a new tool; the operator is notified at once.", api.NeedRight(protocol.RightRead), s.postFeature)),
		api.Define("get_features", http.MethodGet, "/api/v1/features", "Feature requests: your own, or all with the grant right; a page at a time, in the order they came (after, limit).", api.NeedRight(protocol.RightRead), s.listFeatures),
		api.Define("post_features_id_status", http.MethodPost, "/api/v1/features/{id}/status", "Decide a feature request (the human or grant).", api.NeedRight(protocol.RightGrant), s.featureStatus),
	)
}

type postFeatureIn struct {
	Title string         `json:"title" jsonschema:"1 to 120 characters"`
	Body  string         `json:"body" jsonschema:"what the tool should do and why, 1 to 2000 characters"`
	From  *protocol.From `json:"from,omitempty"`
}

// FeatureOut is one feature request.
type FeatureOut struct {
	Feature Feature `json:"feature"`
}

func featureKey(id uint64) []byte { return key(pfxFeat, u64(id)) }

// Two indexes of the feature requests, kept with them, so that a listing
// of one status or of one requester's reads those only:
//
//	l/pa/feats/<status>\0<id 8>     → nil
//	l/pa/featr/<requester>\0<id 8>  → nil
//
// l/ix/features marks a store whose requests are all indexed
// (indexFeatures).
var (
	pfxFeatStatus = []byte("l/pa/feats/")
	pfxFeatBy     = []byte("l/pa/featr/")
	keyFeatIndex  = []byte("l/ix/features")
)

func featStatusPrefix(status string) []byte { return key(pfxFeatStatus, []byte(status), []byte{0}) }
func featByPrefix(requester string) []byte  { return key(pfxFeatBy, []byte(requester), []byte{0}) }

// putFeature stores f, whose status was was ("" for a new request), and
// moves it in the indexes.
func putFeature(tx *store.Tx, f *Feature, was string) error {
	if err := putJSON(tx, featureKey(f.ID), f); err != nil {
		return err
	}
	switch was {
	case "":
		return indexFeature(tx, f)
	case f.Status:
		return nil
	}
	if err := tx.Delete(key(featStatusPrefix(was), u64(f.ID))); err != nil {
		return err
	}
	return tx.Set(key(featStatusPrefix(f.Status), u64(f.ID)), nil)
}

// indexFeature writes f's keys in the indexes.
func indexFeature(tx *store.Tx, f *Feature) error {
	if err := tx.Set(key(featByPrefix(f.Requester), u64(f.ID)), nil); err != nil {
		return err
	}
	return tx.Set(key(featStatusPrefix(f.Status), u64(f.ID)), nil)
}

// indexFeatures indexes the feature requests of a store written before the
// indexes were, once.
func (s *Service) indexFeatures(ctx context.Context) error {
	return s.st.IndexOnce(ctx, pfxFeat, keyFeatIndex, func(tx *store.Tx, _, v []byte) error {
		var f Feature
		if err := json.Unmarshal(v, &f); err != nil {
			return err
		}
		return indexFeature(tx, &f)
	})
}

func (s *Service) postFeature(ctx context.Context, c *api.Call, in postFeatureIn) (FeatureOut, error) {
	title, body := strings.TrimSpace(in.Title), strings.TrimSpace(in.Body)
	if n := protocol.CodePoints(title); n == 0 || n > 120 {
		return FeatureOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "title: 1 to 120 characters.").With("field", "title").With("rule", lengthRule(n))
	}
	if n := protocol.CodePoints(body); n == 0 || n > 2000 {
		return FeatureOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "body: 1 to 2000 characters.").With("field", "body").With("rule", lengthRule(n))
	}
	if ref := protocol.CheckControl("title", title, "body", body); ref != nil {
		return FeatureOut{}, ref
	}
	f := Feature{Title: title, Body: body, Status: "open", Requester: c.Principal.Identity.String()}
	if in.From != nil && in.From.Extension != "" {
		if ref := protocol.CheckExtension("from.extension", in.From.Extension, s.cfg.Limits.Extension); ref != nil {
			return FeatureOut{}, ref
		}
		f.Extension = in.From.Extension
	}
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		id, err := tx.NextID("feature")
		if err != nil {
			return nil, err
		}
		f.ID = id
		f.CreatedAt = protocol.Now()
		f.UpdatedAt = f.CreatedAt
		return nil, putFeature(tx, &f, "")
	})
	if err != nil {
		return FeatureOut{}, err
	}
	s.log.Warn("feature requested", "id", f.ID, "title", f.Title, "by", f.Requester)
	s.cfg.OnFeature(f)
	return FeatureOut{Feature: f}, nil
}

type listFeaturesIn struct {
	Status FeatureStatus `json:"status,omitempty" jsonschema:"only requests in this status: open, accepted, planned, done or rejected"`
	After  uint64        `json:"after,omitempty" jsonschema:"a cursor: only requests after this id (next_cursor of the page before)"`
	Limit  int           `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)"`
}

// FeaturesOut lists feature requests, in the order they came, a page at a
// time.
type FeaturesOut struct {
	Features   []Feature `json:"features"`
	HasMore    bool      `json:"has_more" jsonschema:"more requests follow: ask again with after=next_cursor"`
	NextCursor *uint64   `json:"next_cursor,omitempty" jsonschema:"the last id listed, when more follow"`
}

// listFeatures reads a page: a grant holder's of every request (or of a
// status, from its index), another caller's of its own (from its index),
// from the cursor until the page is full.
func (s *Service) listFeatures(ctx context.Context, c *api.Call, in listFeaturesIn) (FeaturesOut, error) {
	if in.Status != "" && !slices.Contains(FeatureStatuses, in.Status) {
		return FeaturesOut{}, notAFeatureStatus()
	}
	all := c.Principal.Rights.Has(protocol.RightGrant)
	me := c.Principal.Identity.String()
	limit := ClampLimit(in.Limit)
	out := FeaturesOut{Features: []Feature{}}
	if in.After == math.MaxUint64 {
		return out, nil
	}
	err := s.st.View(func(tx *store.Tx) error {
		add := func(f *Feature) error {
			if !all && f.Requester != me || in.Status != "" && f.Status != string(in.Status) {
				return nil
			}
			if len(out.Features) == limit {
				last := out.Features[limit-1].ID
				out.HasMore, out.NextCursor = true, &last
				return store.ErrStop
			}
			out.Features = append(out.Features, *f)
			return nil
		}
		var index []byte
		switch {
		case !all:
			index = featByPrefix(me)
		case in.Status != "":
			index = featStatusPrefix(string(in.Status))
		default:
			return tx.IterateFrom(pfxFeat, featureKey(in.After+1), func(_, v []byte) error {
				var f Feature
				if err := json.Unmarshal(v, &f); err != nil {
					return err
				}
				return add(&f)
			})
		}
		return tx.IterateFrom(index, key(index, u64(in.After+1)), func(k, _ []byte) error {
			if len(k) != len(index)+8 {
				return fmt.Errorf("parley: feature index key %q", k)
			}
			var f Feature
			ok, err := tx.GetJSON(key(pfxFeat, k[len(index):]), &f)
			if err != nil || !ok {
				return err
			}
			return add(&f)
		})
	})
	return out, err
}

type featureStatusIn struct {
	ID     uint64        `json:"id"`
	Status FeatureStatus `json:"status" jsonschema:"open, accepted, planned, done or rejected"`
	Note   string        `json:"note,omitempty" jsonschema:"at most 500 characters"`
}

// notAFeatureStatus refuses a status that names no state of a feature
// request.
func notAFeatureStatus() *protocol.Refusal {
	return protocol.Refusef(protocol.ReasonInvalidBody, "status: one of open, accepted, planned, done, rejected.").With("field", "status").With("rule", "enum")
}

func (s *Service) featureStatus(ctx context.Context, c *api.Call, in featureStatusIn) (FeatureOut, error) {
	if !slices.Contains(FeatureStatuses, in.Status) {
		return FeatureOut{}, notAFeatureStatus()
	}
	if protocol.CodePoints(in.Note) > 500 {
		return FeatureOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "note: at most 500 characters.").With("field", "note").With("rule", "max_length")
	}
	if ref := protocol.CheckControl("note", in.Note); ref != nil {
		return FeatureOut{}, ref
	}
	var f Feature
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		ok, err := tx.GetJSON(featureKey(in.ID), &f)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, protocol.Refusef(protocol.ReasonNotFound, "No feature request %d; see get_features.", in.ID)
		}
		was := f.Status
		f.Status, f.Note, f.DecidedBy, f.UpdatedAt = string(in.Status), in.Note, c.Principal.Identity.String(), protocol.Now()
		return nil, putFeature(tx, &f, was)
	})
	return FeatureOut{Feature: f}, err
}

// lengthRule names the rule a text of n characters broke: empty (after
// trimming) is required, more than the limit is max_length.
func lengthRule(n int) string {
	if n == 0 {
		return "required"
	}
	return "max_length"
}
