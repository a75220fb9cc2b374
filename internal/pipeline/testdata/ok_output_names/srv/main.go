package main

import "fmt"

// fake and registry are taken in this package.
var fake, registry = "a local fake", "a local registry"

func main() {
	fmt.Println(Registry.Names(), fake, registry)
}
