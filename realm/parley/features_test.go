package parley

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// TestFeaturePages: feature requests made by several agents and decided
// at random are listed page by page by their cursor (all of them, and of
// each status, for a grant holder; each agent's own), with has_more and
// next_cursor, as a filter over every record gives; the indexes hold
// exactly what the records say, also once made again from the records,
// as for a store written before them.
func TestFeaturePages(t *testing.T) {
	s := newTestService(t)
	ctx := context.Background()
	r := rand.New(rand.NewSource(17))
	hid, err := protocol.ParseIdentity("human:operator")
	if err != nil {
		t.Fatal(err)
	}
	all, err := protocol.NewRights("read", "write", "pin", "lock", "verify", "grant")
	if err != nil {
		t.Fatal(err)
	}
	human := &api.Call{Principal: &api.Principal{Identity: hid, Human: true, Rights: all}}
	var agents []*api.Principal
	for i := range 4 {
		agents = append(agents, agent(t, fmt.Sprint("f", i)))
	}
	for i := range 70 {
		p := agents[r.Intn(len(agents))]
		out, err := s.postFeature(ctx, &api.Call{Principal: p}, postFeatureIn{Title: fmt.Sprint("feature ", i), Body: "a tool"})
		if err != nil {
			t.Fatal(err)
		}
		for range r.Intn(3) {
			st := FeatureStatuses[r.Intn(len(FeatureStatuses))]
			if _, err := s.featureStatus(ctx, human, featureStatusIn{ID: out.Feature.ID, Status: st}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func() {
		t.Helper()
		var fs []Feature
		var want, got []string
		err := s.st.View(func(tx *store.Tx) error {
			err := tx.Iterate(pfxFeat, false, func(_, v []byte) error {
				var f Feature
				if err := json.Unmarshal(v, &f); err != nil {
					return err
				}
				fs = append(fs, f)
				want = append(want, fmt.Sprintf("s %s %d", f.Status, f.ID), fmt.Sprintf("r %s %d", f.Requester, f.ID))
				return nil
			})
			if err != nil {
				return err
			}
			for _, ix := range []struct {
				pfx []byte
				tag string
			}{{pfxFeatStatus, "s"}, {pfxFeatBy, "r"}} {
				err := tx.IterateKeys(ix.pfx, func(k []byte) error {
					rest := k[len(ix.pfx):]
					got = append(got, fmt.Sprintf("%s %s %d", ix.tag, rest[:len(rest)-9], binaryID(rest[len(rest)-8:])))
					return nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("feature indexes:\ngot  %v\nwant %v", got, want)
		}
		listed := 0
		pages := func(name string, c *api.Call, status FeatureStatus, keep func(*Feature) bool) {
			t.Helper()
			var want []uint64
			for i := range fs {
				if keep(&fs[i]) {
					want = append(want, fs[i].ID)
				}
			}
			for _, limit := range []int{1, 3, 7, 200} {
				var got []uint64
				in := listFeaturesIn{Status: status, Limit: limit}
				for page := 0; ; page++ {
					out, err := s.listFeatures(ctx, c, in)
					if err != nil {
						t.Fatal(err)
					}
					var ids []uint64
					for _, f := range out.Features {
						ids = append(ids, f.ID)
					}
					rest := want[len(got):]
					more := len(rest) > limit
					if exp := rest[:min(limit, len(rest))]; !slices.Equal(ids, exp) || out.HasMore != more {
						t.Fatalf("%s limit %d page %d: %v has_more %v, want %v %v", name, limit, page, ids, out.HasMore, exp, more)
					}
					got = append(got, ids...)
					if !more {
						if out.NextCursor != nil {
							t.Fatalf("%s limit %d page %d: next_cursor on the last page", name, limit, page)
						}
						break
					}
					if out.NextCursor == nil || *out.NextCursor != ids[len(ids)-1] {
						t.Fatalf("%s limit %d page %d: next_cursor %v after %v", name, limit, page, out.NextCursor, ids)
					}
					in.After = *out.NextCursor
				}
				listed += len(got)
			}
		}
		pages("all", human, "", func(*Feature) bool { return true })
		for _, st := range FeatureStatuses {
			pages("status "+string(st), human, st, func(f *Feature) bool { return f.Status == string(st) })
		}
		for _, p := range agents {
			me := p.Identity.String()
			pages(me, &api.Call{Principal: p}, "", func(f *Feature) bool { return f.Requester == me })
			pages(me+" open", &api.Call{Principal: p}, "open", func(f *Feature) bool { return f.Requester == me && f.Status == "open" })
		}
		if listed < 500 {
			t.Fatalf("%d feature requests listed in all: the test lists too few", listed)
		}
	}
	check()

	_, err = s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var keys [][]byte
		for _, pfx := range [][]byte{pfxFeatStatus, pfxFeatBy, keyFeatIndex} {
			if err := tx.IterateKeys(pfx, func(k []byte) error { keys = append(keys, k); return nil }); err != nil {
				return nil, err
			}
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.indexFeatures(ctx); err != nil {
		t.Fatal(err)
	}
	check()
}

func binaryID(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

// TestIndexFeaturesOfALargeStore: the feature requests of a store written
// before their indexes are indexed when the node opens, however many they
// are: more than one transaction holds, here, had their records been
// written again with their keys.
func TestIndexFeaturesOfALargeStore(t *testing.T) {
	s := newTestService(t)
	ctx := context.Background()
	const n, per = 3000, 100
	title, body := strings.Repeat("𝄞", 120), strings.Repeat("𝄞", 2000)
	for first := 1; first <= n; first += per {
		_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
			for id := first; id < first+per; id++ {
				f := Feature{ID: uint64(id), Title: title, Body: body, Status: string(FeatureStatuses[id%len(FeatureStatuses)]), Requester: "ainotes:f"}
				if err := putJSON(tx, featureKey(f.ID), &f); err != nil {
					return nil, err
				}
			}
			return nil, tx.Delete(keyFeatIndex)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.indexFeatures(ctx); err != nil {
		t.Fatal(err)
	}
	byStatus, byRequester := 0, 0
	err := s.st.View(func(tx *store.Tx) error {
		count := func(pfx []byte, n *int) error {
			return tx.IterateKeys(pfx, func([]byte) error { *n++; return nil })
		}
		if err := count(pfxFeatStatus, &byStatus); err != nil {
			return err
		}
		return count(featByPrefix("ainotes:f"), &byRequester)
	})
	if err != nil {
		t.Fatal(err)
	}
	if byStatus != n || byRequester != n {
		t.Errorf("indexed %d by status and %d by requester, want %d", byStatus, byRequester, n)
	}
}
