package corpus

import "relay/store"

// Recent returns the newest messages, newest first, at most limit: what the
// Atom and RSS feeds carry.
func (s *Service) Recent(limit int) ([]Message, error) {
	out := []Message{}
	if limit <= 0 {
		return out, nil
	}
	err := s.st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxMsgSeq, true, func(_, id []byte) error {
			var m Message
			ok, err := readMessage(tx, id, &m)
			if err != nil || !ok {
				return err
			}
			out = append(out, m)
			if len(out) == limit {
				return store.ErrStop
			}
			return nil
		})
	})
	return out, err
}
