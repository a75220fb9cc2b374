package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
)

func main() {
	fmt.Println("names:", Registry.Names())
	for _, e := range Registry.Entries() {
		fmt.Printf("%s aliases=%v import=%s.%s module=%s\n", e.Name, e.Aliases, e.ImportPath, e.Constructor, e.Module)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	for _, name := range []string{"set-header", "passthrough"} {
		mw, found := Registry.Lookup(name)
		if !found {
			panic(name)
		}
		h, err := mw(ok, json.RawMessage(`{"Name":"X-Plugin","Value":"header"}`))
		if err != nil {
			panic(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%s: %s X-Plugin=%q\n", name, rec.Body, rec.Header().Get("X-Plugin"))
	}
	_, err := Registry.Get("headr")
	fmt.Println(err)
}
