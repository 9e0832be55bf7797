package corpus

import "errors"

// ErrNoAgent means a grant names a registration this node does not hold.
var ErrNoAgent = errors.New("corpus: no such agent registration")
