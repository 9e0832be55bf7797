package realm

import (
	"context"
	"encoding/binary"
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

// TestLocalListsPage: access requests applied for, reviewed and withdrawn
// at random, and the tokens they made, are listed page by page by their
// cursor (get_token_requests for the human, of every status, and for each
// applicant, its own; get_tokens), with has_more and next_cursor, as a
// filter over every record gives; also after the indexes are made again
// from the records, as for a store written before them.
func TestLocalListsPage(t *testing.T) {
	tn := startNode(t, "ainotes")
	ctx := context.Background()
	human := &api.Call{Principal: tn.auth.human()}
	r := rand.New(rand.NewSource(13))
	var applicants []*api.Principal
	for i := range 60 {
		out, err := tn.applyToken(ctx, nil, applyIn{Label: fmt.Sprint("agent ", i), Purpose: "p", Model: "m", Client: "c", Provider: "p", Contact: "c"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := tn.auth.Authenticate(out.Token)
		if err != nil {
			t.Fatal(err)
		}
		applicants = append(applicants, p)
		switch r.Intn(6) {
		case 0: // pending
		case 1:
			if _, err := tn.withdrawTokenRequest(ctx, &api.Call{Principal: p}, requestIDIn{ID: out.RequestID}); err != nil {
				t.Fatal(err)
			}
		default:
			d := Decisions[r.Intn(len(Decisions))]
			if _, err := tn.reviewTokenRequest(ctx, human, reviewIn{ID: out.RequestID, Decision: d, Reason: "a reason"}); err != nil {
				t.Fatal(err)
			}
			if d == "defer" && r.Intn(2) == 0 { // decided later
				if _, err := tn.reviewTokenRequest(ctx, human, reviewIn{ID: out.RequestID, Decision: "approve"}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	checkRequestPages(t, tn, applicants)
	checkTokenPages(t, tn)

	// A store from before the indexes: none of their keys, no mark.
	_, err := tn.store.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var keys [][]byte
		for _, pfx := range [][]byte{keyRequestByStatus, keyRequestByToken, keyRequestIndexed} {
			if err := tx.Iterate(pfx, false, func(k, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
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
	if err := indexRequests(ctx, tn.store); err != nil {
		t.Fatal(err)
	}
	checkRequestPages(t, tn, applicants)
}

func checkRequestPages(t *testing.T, tn *testNode, applicants []*api.Principal) {
	t.Helper()
	var all []tokenRequestRec
	err := tn.store.View(func(tx *store.Tx) error {
		return tx.Iterate(keyRequestPrefix, false, func(_, v []byte) error {
			var rec tokenRequestRec
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			all = append(all, rec)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The indexes hold exactly what the records say.
	var want, got []string
	for _, rec := range all {
		want = append(want, fmt.Sprintf("%s/%d", rec.Status, rec.ID), fmt.Sprintf("token %d/%d", rec.Token, rec.ID))
	}
	err = tn.store.View(func(tx *store.Tx) error {
		err := tx.IterateKeys(keyRequestByStatus, func(k []byte) error {
			st, id := k[len(keyRequestByStatus):len(k)-9], binary.BigEndian.Uint64(k[len(k)-8:])
			got = append(got, fmt.Sprintf("%s/%d", st, id))
			return nil
		})
		if err != nil {
			return err
		}
		return tx.IterateKeys(keyRequestByToken, func(k []byte) error {
			k = k[len(keyRequestByToken):]
			got = append(got, fmt.Sprintf("token %d/%d", binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("request indexes:\ngot  %v\nwant %v", got, want)
	}
	listed := 0
	pages := func(name string, p *api.Principal, status RequestStatus, keep func(*tokenRequestRec) bool) {
		t.Helper()
		var want []uint64
		for i := range all {
			if keep(&all[i]) {
				want = append(want, all[i].ID)
			}
		}
		for _, limit := range []int{1, 3, 7, 200} {
			var got []uint64
			in := listRequestsIn{Status: status, Limit: limit}
			for page := 0; ; page++ {
				out, err := tn.listTokenRequests(context.Background(), &api.Call{Principal: p}, in)
				if err != nil {
					t.Fatal(err)
				}
				var ids []uint64
				for _, req := range out.Requests {
					ids = append(ids, req.ID)
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
	hp := tn.auth.human()
	pages("all", hp, "", func(*tokenRequestRec) bool { return true })
	for _, st := range RequestStatuses {
		pages("status "+string(st), hp, st, func(rec *tokenRequestRec) bool { return rec.Status == string(st) })
	}
	for i, p := range applicants[:10] {
		pages(fmt.Sprint("applicant ", i), p, "", func(rec *tokenRequestRec) bool { return rec.Token == p.TokenID })
		pages(fmt.Sprint("applicant ", i, " pending"), p, "pending", func(rec *tokenRequestRec) bool { return rec.Token == p.TokenID && rec.Status == "pending" })
	}
	if listed < 400 {
		t.Fatalf("%d requests listed in all: the test lists too few", listed)
	}
}

func checkTokenPages(t *testing.T, tn *testNode) {
	t.Helper()
	var want []uint64
	tn.auth.mu.RLock()
	for id := range tn.auth.tokens {
		want = append(want, id)
	}
	tn.auth.mu.RUnlock()
	slices.Sort(want)
	for _, limit := range []int{1, 7, 200} {
		var got []uint64
		in := listTokensIn{Limit: limit}
		for {
			out, err := tn.listTokens(context.Background(), nil, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, tok := range out.Tokens {
				got = append(got, tok.ID)
			}
			if more := len(got) < len(want); out.HasMore != more || len(out.Tokens) > limit {
				t.Fatalf("tokens limit %d: %d listed, has_more %v", limit, len(got), out.HasMore)
			}
			if !out.HasMore {
				break
			}
			in.After = *out.NextCursor
		}
		if !slices.Equal(got, want) {
			t.Fatalf("tokens, pages of %d:\ngot  %v\nwant %v", limit, got, want)
		}
	}
}

// TestIndexRequestsOfALargeStore: the access requests of a store written
// before their indexes are indexed when the node opens, however many they
// are: more than one transaction holds, here, had their records been
// written again with their keys.
func TestIndexRequestsOfALargeStore(t *testing.T) {
	tn := startNode(t, "ainotes")
	ctx := context.Background()
	const n, per = 3500, 100
	long := func(n int) string { return strings.Repeat("𝄞", n) }
	for first := 1; first <= n; first += per {
		_, err := tn.store.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
			for id := first; id < first+per; id++ {
				rec := tokenRequestRec{Token: 1}
				rec.ID, rec.Status = uint64(id), reqPending
				rec.Label, rec.Purpose, rec.Model, rec.Client, rec.Provider, rec.Contact = long(100), long(1000), long(200), long(200), long(200), long(200)
				b, err := json.Marshal(&rec)
				if err != nil {
					return nil, err
				}
				if err := tx.Set(requestKey(rec.ID), b); err != nil {
					return nil, err
				}
			}
			return nil, tx.Delete(keyRequestIndexed)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := indexRequests(ctx, tn.store); err != nil {
		t.Fatal(err)
	}
	byStatus, byToken := 0, 0
	err := tn.store.View(func(tx *store.Tx) error {
		count := func(pfx []byte, n *int) error {
			return tx.IterateKeys(pfx, func([]byte) error { *n++; return nil })
		}
		if err := count(requestStatusPrefix(reqPending), &byStatus); err != nil {
			return err
		}
		return count(requestTokenPrefix(1), &byToken)
	})
	if err != nil {
		t.Fatal(err)
	}
	if byStatus != n || byToken != n {
		t.Errorf("indexed %d by status and %d by token, want %d", byStatus, byToken, n)
	}
}
