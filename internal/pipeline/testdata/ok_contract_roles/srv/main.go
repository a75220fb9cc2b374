package main

import (
	"fmt"
	"strings"
)

func main() {
	for _, e := range Registry.Table().Entries() {
		fmt.Printf("%s roles=%s filter=%v scorer=%v\n", e.Name, strings.Join(e.Roles, ","), e.Serves("filter"), e.Serves("scorer"))
	}
	for _, name := range []string{"even", "high", "both"} {
		for _, role := range []string{"filter", "scorer"} {
			s, err := Registry.Create(name, role)
			if err != nil {
				fmt.Printf("create %s %s: error: %v\n", name, role, err)
				continue
			}
			fmt.Printf("create %s %s: %T %s\n", name, role, s, s.Name())
		}
	}
	_, err := Registry.Create("evn", "filter")
	fmt.Println(err)
}
