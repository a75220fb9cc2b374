//go:build ignore

package tool
