// Command scheduler picks the model server pod for a request with the
// plugins its configuration names, as the llm-d inference scheduler does;
// which plugins it can name is fixed at compile time by plugins.yaml
// (or a deployment manifest given to kvgen build).
//
//	scheduler -config config.json -pods pods.json -prompt 'hello'
//	scheduler -list-plugins
package main

//go:generate go tool kvgen -manifest plugins.yaml

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/kvgen/kvgen/examples/scheduler/plugin"
)

// config names the plugin instances to run, by type, as llm-d's
// EndpointPickerConfig does.
type config struct {
	Plugins []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Weight     *float64        `json:"weight"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"plugins"`
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("scheduler: ")
	configFile := flag.String("config", "", "the scheduler's configuration (JSON)")
	podsFile := flag.String("pods", "", "the candidate pods with their metrics (JSON)")
	prompt := flag.String("prompt", "", "the request's prompt")
	list := flag.Bool("list-plugins", false, "list the plugin types this binary links, with their modules, and exit")
	flag.Parse()
	if *list {
		for _, e := range Registry.Entries() {
			fmt.Printf("%s\t%s\t%s.%s\t%s %s\n", e.Name, strings.Join(e.Roles, ","), e.ImportPath, e.Constructor, e.Module, e.Version)
		}
		return
	}
	var cfg config
	var pods []plugin.Pod
	if err := readJSON(*configFile, &cfg); err != nil {
		log.Fatal(err)
	}
	if err := readJSON(*podsFile, &pods); err != nil {
		log.Fatal(err)
	}
	var plugins []plugin.Weighted
	for _, pc := range cfg.Plugins {
		factory, err := Registry.Get(pc.Type)
		if err != nil {
			log.Fatalf("%s: plugin %q: %v", *configFile, pc.Name, err)
		}
		p, err := factory(pc.Name, pc.Parameters)
		if err != nil {
			log.Fatalf("%s: %v", *configFile, err)
		}
		w := 1.0
		if pc.Weight != nil {
			w = *pc.Weight
		}
		plugins = append(plugins, plugin.Weighted{Plugin: p, Weight: w})
	}
	best, scores, err := plugin.Pick(plugins, plugin.Request{Prompt: *prompt}, pods)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range pods {
		if s, ok := scores[p.Name]; ok {
			fmt.Printf("%s\t%.2f\n", p.Name, s)
		}
	}
	fmt.Println("picked", best.Name)
}

func readJSON(file string, v any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
