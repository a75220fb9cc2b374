package kv

import "context"

// LayerAppender is implemented by workers that can load a layer into memory
// the caller owns, which spares an allocation per loaded layer: a host that
// keeps one buffer per layer reuses it from request to request.
type LayerAppender interface {
	// AppendLayer appends what LoadLayer would return to dst and returns the
	// extended slice, which uses dst's array when its capacity suffices,
	// as append does. The connector keeps no reference to it. On an error
	// it returns dst: the bytes of dst are unchanged up to its length,
	// though its spare capacity may have been written. Its errors are
	// LoadLayer's: a miss wraps [ErrMiss].
	AppendLayer(ctx context.Context, req *Request, layer string, numTokens int, dst []byte) ([]byte, error)
}

// AppendLayer appends one layer's KV to dst through w: with w's own
// AppendLayer when w is a [LayerAppender], with LoadLayer and a copy
// otherwise.
func AppendLayer(ctx context.Context, w Worker, req *Request, layer string, numTokens int, dst []byte) ([]byte, error) {
	if a, ok := w.(LayerAppender); ok {
		return a.AppendLayer(ctx, req, layer, numTokens, dst)
	}
	kv, err := w.LoadLayer(ctx, req, layer, numTokens)
	if err != nil {
		return dst, err
	}
	if cap(dst) == 0 {
		return kv, nil // LoadLayer's result is the caller's: no copy needed
	}
	return append(dst, kv...), nil
}
