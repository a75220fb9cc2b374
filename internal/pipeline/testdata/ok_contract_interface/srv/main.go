package main

import "fmt"

func main() {
	for _, name := range Registry.Names() {
		newPlugin, _ := Registry.Lookup(name)
		fmt.Printf("%s: %s\n", name, newPlugin().Name())
	}
}
