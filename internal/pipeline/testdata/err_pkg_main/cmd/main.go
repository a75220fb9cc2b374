package main

func New() {}

func main() {}
