// Command gateway is an HTTP gateway whose middleware plugins kvgen links
// at compile time from plugins.yaml: its configuration chains them by
// name in front of a backend.
//
//	gateway -config gateway.json -listen 127.0.0.1:8080
//	gateway -config gateway.json -request /hello -header 'Authorization: Bearer s3cret'
//	gateway -list-plugins
package main

//go:generate go tool kvgen -manifest plugins.yaml

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/examples/gateway/middleware"
)

// config is the gateway's configuration: the chain, outermost first.
type config struct {
	Chain []middleware.Step `json:"chain"`
}

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(s string) error { *h = append(*h, s); return nil }

func main() {
	log.SetFlags(0)
	log.SetPrefix("gateway: ")
	configFile := flag.String("config", "", "the gateway's configuration (JSON)")
	listen := flag.String("listen", "", "serve on this address")
	request := flag.String("request", "", "send one GET request for this path through the chain, print the response and exit")
	method := flag.String("method", http.MethodGet, "the method of -request")
	var headers headerFlags
	flag.Var(&headers, "header", "a header of -request, 'Name: value' (repeatable)")
	list := flag.Bool("list-plugins", false, "list the plugins this binary links, with their modules, and exit")
	flag.Parse()

	if *list {
		for _, e := range Registry.Entries() {
			fmt.Printf("%s\t%s.%s\t%s %s\n", e.Name, e.ImportPath, e.Constructor, e.Module, e.Version)
		}
		return
	}
	data, err := os.ReadFile(*configFile)
	if err != nil {
		log.Fatal(err)
	}
	var cfg config
	if err := json.Unmarshal(data, &cfg); err != nil {
		log.Fatalf("%s: %v", *configFile, err)
	}
	h, err := middleware.Chain(Registry.Get, cfg.Chain, http.HandlerFunc(backend))
	if err != nil {
		log.Fatalf("%s: %v", *configFile, err)
	}
	switch {
	case *request != "":
		r := httptest.NewRequest(*method, *request, nil)
		for _, kv := range headers {
			k, v, _ := strings.Cut(kv, ":")
			r.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		printResponse(os.Stdout, w.Result())
	case *listen != "":
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			log.Fatal(err)
		}
		log.Fatal(serve(ln, h, os.Stdout))
	default:
		log.Fatal("give -listen ADDR or -request PATH")
	}
}

// serve serves h on ln, first saying where, as kvserver does: with
// -listen 127.0.0.1:0 that is the port the system chose.
func serve(ln net.Listener, h http.Handler, stdout io.Writer) error {
	fmt.Fprintf(stdout, "gateway: serving on http://%s\n", ln.Addr())
	return http.Serve(ln, h)
}

// backend is what the chain guards: it greets the path.
func backend(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "hello from %s\n", r.URL.Path)
}

// printResponse prints the status, the headers sorted, and the body.
func printResponse(w io.Writer, resp *http.Response) {
	fmt.Fprintln(w, resp.Status)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range resp.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(w, "%s: %s\n", k, strings.Join(resp.Header[k], ", "))
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(w, "\n%s", body)
}
