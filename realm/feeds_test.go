package realm

import (
	"bytes"
	"encoding/xml"
	"html"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"relay/realm/corpus"
)

// TestFeeds parses the Atom and RSS feeds with a real feed parser and with
// encoding/xml: the newest messages first, kinds as kind: categories.
func TestFeeds(t *testing.T) {
	f := newCorpusFixture(t)
	// Content that XML must escape, and a character XML cannot carry.
	st, out, _ := f.write(t, f.agent, "/appendToConversation/"+f.conv, "feed-1", map[string]any{
		"content": "<b>bold</b> & \"quotes\" ]]> \x01 done", "kind": []string{"proposal"}})
	if st != 201 {
		t.Fatalf("append: %d %v", st, out)
	}
	newest := out["message_id"].(string)
	want := []string{newest, f.second, f.first}
	wantKinds := [][]string{{"kind:proposal"}, {"kind:challenge", "kind:question"}, {"kind:claim"}}

	for _, tc := range []struct {
		path, feedType, mediaType string
	}{
		{"/atom.xml", "atom", mediaAtom},
		{"/rss.xml", "rss", mediaRSS},
	} {
		status, body, hdr := f.send(t, "GET", tc.path, nil)
		if status != 200 || mediaOf(hdr) != tc.mediaType {
			t.Fatalf("%s: %d %s", tc.path, status, hdr.Get("Content-Type"))
		}
		if hdr.Get("ETag") == "" || hdr.Get("Last-Modified") != "" || hdr.Get("Content-Signal") != contentSignal {
			t.Errorf("%s: headers %v", tc.path, hdr)
		}
		// Well-formed XML.
		dec := xml.NewDecoder(bytes.NewReader(body))
		for {
			_, err := dec.Token()
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("%s is not well-formed: %v", tc.path, err)
				}
				break
			}
		}
		feed, err := gofeed.NewParser().ParseString(string(body))
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if feed.FeedType != tc.feedType || len(feed.Items) != len(want) {
			t.Fatalf("%s: %s feed with %d items", tc.path, feed.FeedType, len(feed.Items))
		}
		for i, it := range feed.Items {
			if !strings.HasSuffix(it.Link, "/messages/"+want[i]) || it.GUID != "urn:uuid:"+want[i] {
				t.Errorf("%s item %d: link %q, guid %q, want message %s", tc.path, i, it.Link, it.GUID, want[i])
			}
			if !slices.Equal(it.Categories, wantKinds[i]) {
				t.Errorf("%s item %d: categories %v, want %v", tc.path, i, it.Categories, wantKinds[i])
			}
			if it.PublishedParsed == nil {
				t.Errorf("%s item %d: no publication date", tc.path, i)
			}
		}
		text := feed.Items[0].Content
		if tc.feedType == "rss" {
			// RSS readers take a description for HTML: the message's text
			// comes escaped, so its markup shows as text and runs nothing.
			text = feed.Items[0].Description
			if strings.Contains(text, "<b>") {
				t.Errorf("%s: the description carries the message's markup as HTML: %q", tc.path, text)
			}
			text = html.UnescapeString(text)
		}
		if !strings.Contains(text, "<b>bold</b> & \"quotes\" ]]>") {
			t.Errorf("%s: content %q", tc.path, text)
		}
		if feed.Items[0].Author == nil && len(feed.Items[0].Authors) == 0 {
			t.Errorf("%s: no author", tc.path)
		}
		// The feed revalidates.
		if st, b, _ := f.send(t, "GET", tc.path, http.Header{"If-None-Match": {hdr.Get("ETag")}}); st != 304 || len(b) != 0 {
			t.Errorf("%s If-None-Match: %d", tc.path, st)
		}
		// No Last-Modified: a date cannot tell a feed changed in the same
		// second, or by another realm's late message.
		if st, _, _ := f.send(t, "GET", tc.path, http.Header{"If-Modified-Since": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}}); st != 200 {
			t.Errorf("%s If-Modified-Since: %d", tc.path, st)
		}
		// A native format: incompatible Accept is 406 in plain text.
		st, b, h := f.send(t, "GET", tc.path, acceptHeader("application/json"))
		if st != 406 || mediaOf(h) != mediaText || !bytes.Contains(b, []byte(tc.mediaType)) {
			t.Errorf("%s with Accept: application/json: %d %s %q", tc.path, st, h.Get("Content-Type"), b)
		}
		// A feed reader asking for the other feed format gets this one.
		for _, other := range []string{mediaAtom, mediaRSS} {
			if st, _, h := f.send(t, "GET", tc.path, acceptHeader(other)); st != 200 || mediaOf(h) != tc.mediaType {
				t.Errorf("%s with Accept: %s: %d %s, want 200 %s", tc.path, other, st, h.Get("Content-Type"), tc.mediaType)
			}
		}
		if st, _, h := f.send(t, "GET", tc.path, acceptHeader("application/xml;q=0.5, text/html")); st != 200 || mediaOf(h) != mediaXML {
			t.Errorf("%s with Accept: application/xml: %d %s", tc.path, st, h.Get("Content-Type"))
		}
		// limit.
		if st, b, _ := f.send(t, "GET", tc.path+"?limit=1", nil); st != 200 || bytes.Count(b, []byte("urn:uuid:")) != 1 {
			t.Errorf("%s?limit=1: %d %d entries", tc.path, st, bytes.Count(b, []byte("urn:uuid:")))
		}
		if st, _, _ := f.send(t, "GET", tc.path+"?limit=201", nil); st != 400 {
			t.Errorf("%s?limit=201: %d", tc.path, st)
		}
	}
}

func TestFeedsEmpty(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, path := range []string{"/atom.xml", "/rss.xml"} {
		status, body, _ := tn.send(t, "GET", path, nil)
		if status != 200 {
			t.Fatalf("%s: %d", path, status)
		}
		feed, err := gofeed.NewParser().ParseString(string(body))
		if err != nil || len(feed.Items) != 0 {
			t.Fatalf("%s: %v %v", path, err, feed)
		}
	}
}

func TestSitemap(t *testing.T) {
	f := newCorpusFixture(t)
	status, body, hdr := f.send(t, "GET", "/sitemap.xml", nil)
	if status != 200 || mediaOf(hdr) != mediaXML {
		t.Fatalf("sitemap: %d %s", status, hdr.Get("Content-Type"))
	}
	var set struct {
		XMLName xml.Name `xml:"http://www.sitemaps.org/schemas/sitemap/0.9 urlset"`
		URLs    []struct {
			Loc     string `xml:"loc"`
			LastMod string `xml:"lastmod"`
		} `xml:"url"`
	}
	if err := xml.Unmarshal(body, &set); err != nil {
		t.Fatal(err)
	}
	locs := map[string]string{}
	for _, u := range set.URLs {
		locs[u.Loc] = u.LastMod
	}
	for _, p := range []string{"/", "/llms.txt", "/openapi.json", "/conversations", "/conversations/" + f.conv, "/agents/" + f.agent.author} {
		if _, ok := locs[f.srv.URL+p]; !ok {
			t.Errorf("the sitemap lacks %s", p)
		}
	}
	if locs[f.srv.URL+"/conversations/"+f.conv] == "" {
		t.Error("a conversation has no lastmod")
	}
	if st, b, h := f.send(t, "GET", "/sitemap.xml", acceptHeader("application/json")); st != 406 || mediaOf(h) != mediaText {
		t.Errorf("sitemap with Accept: application/json: %d %s", st, b)
	}
}

// TestFeedUpdated: a feed is as new as its newest message, whichever realm
// wrote it and in whatever order they came.
func TestFeedUpdated(t *testing.T) {
	t1 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	msg := func(realm string, at time.Time) corpus.Message { return corpus.Message{Realm: realm, CreatedAt: at} }
	for _, tc := range []struct {
		name string
		msgs []corpus.Message
		want time.Time
	}{
		{"empty", nil, t1},
		{"own", []corpus.Message{msg("home", t2), msg("home", t1)}, t2},
		{"another realm's, late", []corpus.Message{msg("away", t1), msg("home", t2)}, t2},
	} {
		f := FeedOut{Messages: tc.msgs, realm: "home", empty: t1}
		if !f.updated().Equal(tc.want) {
			t.Errorf("%s: the feed's updated %v, want %v", tc.name, f.updated(), tc.want)
		}
	}
}
