package bench

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// The corpus phases write and search text drawn from one vocabulary whose
// word frequencies follow Zipf's law, as natural language does: a few words
// ("the", "of", …) occur in most messages, most words are rare. That shape,
// not the words themselves, decides what an inverted index costs: long
// posting lists for the common words, many short ones for the rest.
//
// The most frequent ranks are real English words, in about their order of
// frequency; the long tail is made of pronounceable synthetic words, so the
// vocabulary can be as large as wanted without a word list in the source.

// headWords are the most frequent ranks, roughly in English frequency order.
var headWords = strings.Fields(`
the of and to a in is that for it as was with be by on not he this are or
his from at which but have an they you were her she there been one all we
their has would when if so no will can more other about what up out into
them some could time these two may then do first any my now such like our
over man me even most made after also did many before must through back
years where much your way well down should because each just those people
how too little state good very make world still own see men work long get
here between both life being under never day same another know while last
might us great old year off come since against go came right used take
three agent agents corpus message messages claim question proposal
latency search index sync snapshot stream change changes evidence cache
model models data system systems server client network test tests result
results error errors write read store event events conversation realm node
thread answer reason source memory query queries token tokens protocol
`)

// vocabulary is the word list, by rank.
type vocabulary struct {
	words []string
}

// syllables build the synthetic words of the tail.
var (
	onsets = []string{"b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
		"br", "ch", "cl", "cr", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr", "qu"}
	vowels = []string{"a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"}
	codas  = []string{"", "", "", "n", "r", "s", "l", "m", "t", "nd", "rk", "st", "x"}
)

// newVocabulary makes a vocabulary of size words (at least the head),
// the same for the same seed.
func newVocabulary(size int, seed uint64) *vocabulary {
	size = max(size, len(headWords))
	v := &vocabulary{words: make([]string, 0, size)}
	seen := make(map[string]bool, size)
	for _, w := range headWords {
		if !seen[w] {
			seen[w] = true
			v.words = append(v.words, w)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var b strings.Builder
	for len(v.words) < size {
		b.Reset()
		n := 2 + r.IntN(3)
		for range n {
			b.WriteString(onsets[r.IntN(len(onsets))])
			b.WriteString(vowels[r.IntN(len(vowels))])
			b.WriteString(codas[r.IntN(len(codas))])
		}
		w := b.String()
		if len(w) > 24 {
			w = w[:24]
		}
		if !seen[w] {
			seen[w] = true
			v.words = append(v.words, w)
		}
	}
	return v
}

// Zipf parameters: with s 1.07 and v 2 the commonest word is about 6 % of
// all tokens, near "the" in English prose.
const (
	zipfS = 1.07
	zipfV = 2
)

// textGen draws text from a vocabulary; one per goroutine (it holds its
// own generator).
type textGen struct {
	v    *vocabulary
	r    *rand.Rand
	zipf *rand.Zipf
}

func (v *vocabulary) gen(seed uint64) *textGen {
	r := rand.New(rand.NewPCG(seed, 0x7e47))
	return &textGen{v: v, r: r, zipf: rand.NewZipf(r, zipfS, zipfV, uint64(len(v.words)-1))}
}

func (g *textGen) word() string { return g.v.words[g.zipf.Uint64()] }

// appendSentences appends between lo and hi words as sentences: capitals,
// commas, full stops and the odd question mark. Only ASCII letters, spaces
// and punctuation, so the text needs no escaping inside a JSON string.
func (g *textGen) appendSentences(b []byte, lo, hi int) []byte {
	n := lo + g.r.IntN(hi-lo+1)
	inSentence := 0
	for i := range n {
		w := g.word()
		if inSentence == 0 {
			if i > 0 {
				b = append(b, ' ')
			}
			b = append(b, w[0]-'a'+'A')
			b = append(b, w[1:]...)
		} else {
			b = append(b, ' ')
			b = append(b, w...)
		}
		inSentence++
		switch {
		case i == n-1 || inSentence >= 6 && g.r.IntN(8) == 0:
			if g.r.IntN(6) == 0 {
				b = append(b, '?')
			} else {
				b = append(b, '.')
			}
			inSentence = 0
		case inSentence >= 3 && g.r.IntN(10) == 0:
			b = append(b, ',')
		}
	}
	return b
}

// Message sizes in words: about 40 on average, some 250 bytes of content.
const (
	contentMinWords = 10
	contentMaxWords = 70
	subjectMinWords = 3
	subjectMaxWords = 8
)

// benchKinds are the kinds a message gets, one each; mostly posts.
var benchKinds = []string{"post", "post", "post", "post", "post", "claim", "question", "proposal", "challenge"}

// appendBody appends the JSON body of a corpus write; a subject makes it a
// createConversation.
func (g *textGen) appendBody(b []byte, withSubject bool) []byte {
	b = append(b, '{')
	if withSubject {
		b = append(b, `"subject":"`...)
		b = g.appendSentences(b, subjectMinWords, subjectMaxWords)
		b = append(b, `",`...)
	}
	b = append(b, `"content":"`...)
	b = g.appendSentences(b, contentMinWords, contentMaxWords)
	b = append(b, `","kind":["`...)
	b = append(b, benchKinds[g.r.IntN(len(benchKinds))]...)
	b = append(b, `"]`...)
	if g.r.IntN(4) == 0 {
		b = append(b, `,"tags":["bench-`...)
		b = strconv.AppendInt(b, int64(g.r.IntN(20)), 10)
		b = append(b, `"]`...)
	}
	return append(b, '}')
}

// query is a search of one to three words drawn like the messages' words,
// so the common words are as common in queries as in text: the costly case
// for an inverted index, not the kind one.
func (g *textGen) query() string {
	n := 1 + g.r.IntN(3)
	words := make([]string, n)
	for i := range words {
		words[i] = g.word()
	}
	return strings.Join(words, " ")
}
