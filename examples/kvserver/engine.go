package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"

	"github.com/kvgen/kvgen/examples/external/kvevents"
	"github.com/kvgen/kvgen/registry/kv"
)

// kvBytesPerToken is the size of one token's KV in one layer.
const kvBytesPerToken = 128

// errWrongData marks loaded KV that differs from recomputation: the one
// failure a connector must never produce.
var errWrongData = errors.New("loaded KV differs from recomputation")

// engine is the part of an inference engine that talks to connectors. Like
// vLLM, it creates the connector once per role and keeps it.
type engine struct {
	reg       *kv.Registry
	log       *slog.Logger
	cfg       kv.Config
	scheduler kv.Scheduler
	worker    kv.Worker
	// events publishes the KV events the worker side reports on vLLM's
	// wire (-kv-events-config); nil when that is off.
	events *kvevents.Publisher
}

func (e *engine) schedulerSide(ctx context.Context) (kv.Scheduler, error) {
	if e.scheduler == nil {
		c, err := e.reg.CreateScheduler(ctx, e.cfg)
		if err != nil {
			return nil, err
		}
		e.scheduler = c
	}
	return e.scheduler, nil
}

func (e *engine) workerSide(ctx context.Context) (kv.Worker, error) {
	if e.worker == nil {
		c, err := e.reg.CreateWorker(ctx, e.cfg)
		if err != nil {
			return nil, err
		}
		e.worker = c
		if e.events != nil {
			if r, ok := c.(kv.EventReporter); ok {
				r.ReportEvents(e.events.Emit)
			} else {
				e.log.Warn("kv events: the connector reports no KV events; none are published", "connector", e.cfg.Connector)
			}
		}
	}
	return e.worker, nil
}

// Close closes the connectors the engine created.
func (e *engine) Close() error {
	var errs []error
	if e.scheduler != nil {
		errs = append(errs, e.scheduler.Close())
	}
	if e.worker != nil {
		errs = append(errs, e.worker.Close())
	}
	return errors.Join(errs...)
}

type prefillReport struct {
	Connector string `json:"connector"`
	Engine    string `json:"engine_id"`
	Prompt    int    `json:"prompt_tokens"`
	Saved     int    `json:"saved_tokens"`
	Layers    int    `json:"layers"`
}

type decodeReport struct {
	Connector  string `json:"connector"`
	Engine     string `json:"engine_id"`
	Prompt     int    `json:"prompt_tokens"`
	Matched    int    `json:"matched_tokens"`
	Loaded     int    `json:"loaded_tokens"`
	Recomputed int    `json:"recomputed_tokens"`
	Verified   bool   `json:"verified"`
	// FailedBlocks are the blocks [first, end) a load reported failed, if
	// one did.
	FailedBlocks []int `json:"failed_blocks,omitempty"`
}

// loadablePrefix is how many prompt tokens a decode step can load: the full
// blocks before the last token. As in vLLM, the last prompt token is always
// computed, since its logits start the generation; prefill saves exactly
// this prefix, so that what decode looks up is what prefill saved for every
// prompt length, a multiple of the block size or not.
func loadablePrefix(promptLen, blockSize int) int {
	if promptLen <= 1 {
		return 0
	}
	return (promptLen - 1) / blockSize * blockSize
}

// errShortPrompt says that a prompt is too short to have KV to save: the
// request's fault, not the server's.
var errShortPrompt = errors.New("prompt too short")

// prefill computes the KV of the prompt's loadable prefix and saves it
// through the worker side.
func (e *engine) prefill(ctx context.Context, req *kv.Request) (*prefillReport, error) {
	w, err := e.workerSide(ctx)
	if err != nil {
		return nil, err
	}
	n := loadablePrefix(len(req.PromptTokens), e.cfg.BlockSize)
	if n == 0 {
		return nil, fmt.Errorf("%w: a prompt of %d tokens has no full block of %d before its last token to save", errShortPrompt, len(req.PromptTokens), e.cfg.BlockSize)
	}
	for _, layer := range e.cfg.LayerNames {
		if err := w.SaveLayer(ctx, req, layer, n, computeKV(req.PromptTokens[:n], layer)); err != nil {
			return nil, fmt.Errorf("saving %s: %w", kv.Quote(layer), err)
		}
	}
	if err := w.WaitForSave(ctx); err != nil {
		return nil, err
	}
	return &prefillReport{Connector: e.cfg.Connector, Engine: e.cfg.EngineID, Prompt: len(req.PromptTokens), Saved: n, Layers: len(e.cfg.LayerNames)}, nil
}

// decode loads what the connector has of the prompt and recomputes the
// rest. As in vLLM, the last prompt token is always computed, since its
// logits start the generation.
func (e *engine) decode(ctx context.Context, req *kv.Request) (*decodeReport, error) {
	r := &decodeReport{Connector: e.cfg.Connector, Engine: e.cfg.EngineID, Prompt: len(req.PromptTokens)}
	sc, err := e.schedulerSide(ctx)
	if err != nil {
		return nil, err
	}
	wc, err := e.workerSide(ctx)
	if err != nil {
		return nil, err
	}

	matched, err := sc.MatchedTokens(ctx, req, 0)
	if err != nil {
		if err := e.loadFailed("lookup", err); err != nil {
			return nil, err
		}
		matched = 0
	}
	r.Matched = matched
	n := min(matched, loadablePrefix(len(req.PromptTokens), e.cfg.BlockSize))
	if n > 0 {
		if err := sc.AfterAlloc(ctx, req, n); err != nil {
			return nil, err
		}
	}
	r.Verified = true
	// One buffer serves every layer: a connector that can load into it
	// (kv.LayerAppender) allocates nothing per layer.
	var buf []byte
load:
	for _, layer := range e.cfg.LayerNames {
		if n == 0 {
			break
		}
		kvData, err := kv.AppendLayer(ctx, wc, req, layer, n, buf[:0])
		buf = kvData
		if err != nil {
			// As vLLM does with the blocks a connector reports failed: the
			// blocks before the first failed one are kept, the rest
			// recomputed, or the request fails naming them.
			bs := e.cfg.BlockSize
			first, end := kv.FailedBlocks(err, n, bs)
			r.FailedBlocks = []int{first, end}
			if e.cfg.LoadFailurePolicy == kv.PolicyFail {
				return nil, fmt.Errorf("loading %s: blocks %d to %d (tokens %d to %d) failed: %w (kv_load_failure_policy is fail)",
					kv.Quote(layer), first, end-1, first*bs, end*bs-1, err)
			}
			e.log.Warn("kv load failed; recomputing from the first failed block", "layer", layer, "first_block", first, "end_block", end, "error", err)
			if keep := max(first, 0) * bs; keep < n {
				n = keep
			} else {
				n = 0 // a report that keeps everything is no report
			}
			goto load // the layers loaded so far held more than is kept now
		}
		if want := computeKV(req.PromptTokens[:n], layer); !bytes.Equal(kvData, want) {
			return nil, fmt.Errorf("%s, layer %s, %d tokens: %w", kv.Quote(e.cfg.Connector), kv.Quote(layer), n, errWrongData)
		}
	}
	r.Loaded, r.Recomputed = n, len(req.PromptTokens)-n
	if err := sc.RequestFinished(ctx, req); err != nil {
		return nil, err
	}
	return r, nil
}

// loadFailed applies the load-failure policy: recompute, or fail.
func (e *engine) loadFailed(what string, err error) error {
	if e.cfg.LoadFailurePolicy == kv.PolicyFail {
		return fmt.Errorf("%s: %w (kv_load_failure_policy is fail)", what, err)
	}
	e.log.Warn("kv load failed; recomputing", "step", what, "error", err)
	return nil
}

// computeKV stands in for the model: each token's KV in a layer is a
// function of the layer, the token's position and the tokens before it.
func computeKV(tokens []uint32, layer string) []byte {
	out := make([]byte, 0, len(tokens)*kvBytesPerToken)
	h := sha256.New()
	h.Write([]byte(layer))
	var state [sha256.Size]byte
	var buf [8]byte
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[:4], uint32(i))
		binary.LittleEndian.PutUint32(buf[4:], t)
		h.Write(buf[:])
		sum := h.Sum(state[:0])
		for j := 0; j < kvBytesPerToken; j += len(sum) {
			out = append(out, sum...)
			sum[0]++
		}
	}
	return out
}

// tokenize maps the prompt's words to token ids and repeats them to n
// tokens: a stand-in for a real tokenizer that is stable across processes.
func tokenize(prompt string, n int) []uint32 {
	words := strings.Fields(prompt)
	if len(words) == 0 {
		words = []string{""}
	}
	ids := make([]uint32, len(words))
	for i, w := range words {
		h := fnv.New32a()
		h.Write([]byte(w))
		ids[i] = h.Sum32() % 50000
	}
	if n <= 0 {
		n = len(ids)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = ids[i%len(ids)]
	}
	return out
}
