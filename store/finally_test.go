package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"relay/protocol"
)

// finallyTests are the ways an op ends; each registers two functions that
// record how they were called, and the first writes l/f/<name> when ok.
var finallyTests = []struct {
	name      string
	op        func(tx *Tx) error // after the functions are registered
	firstErr  error              // what the first function returns when ok
	wantCalls string
	wantErr   bool
	wantKey   bool
}{
	{"succeeds", func(*Tx) error { return nil }, nil, "first(true) second(true)", false, true},
	{"fails", func(*Tx) error { return errors.New("refused") }, nil, "first(false) second(false)", true, false},
	{"panics", func(*Tx) error { panic("boom") }, nil, "first(false) second(false)", true, false},
	{"first fails", func(*Tx) error { return nil }, errors.New("cannot"), "first(true) second(false)", true, false},
}

// Finally's functions run once each when the op ends: with ok while its
// writes are to be kept, and their writes then commit with the op's; a
// function's error fails the op and the ones after it only clean up.
func TestFinally(t *testing.T) {
	s := openTest(t, testConfig(""))
	for _, tt := range finallyTests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			key := []byte("l/f/" + tt.name)
			_, err := s.Submit(context.Background(), func(tx *Tx) (*protocol.Draft, error) {
				tx.Finally(func(ok bool) error {
					calls = append(calls, fmt.Sprintf("first(%v)", ok))
					if !ok {
						return nil
					}
					if tt.firstErr != nil {
						return tt.firstErr
					}
					return tx.Set(key, []byte("written at the end"))
				})
				tx.Finally(func(ok bool) error {
					calls = append(calls, fmt.Sprintf("second(%v)", ok))
					return nil
				})
				return nil, tt.op(tx)
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Submit: %v", err)
			}
			if got := fmt.Sprint(calls); got != "["+tt.wantCalls+"]" {
				t.Errorf("calls %s, want [%s]", got, tt.wantCalls)
			}
			err = s.View(func(tx *Tx) error {
				_, err := tx.Get(key)
				if found := err == nil; found != tt.wantKey {
					t.Errorf("key written: %v, want %v (%v)", found, tt.wantKey, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
