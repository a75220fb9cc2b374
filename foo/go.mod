module bad path!

go 1.26.0

require github.com/kvgen/kvgen v0.0.0-00010101000000-000000000000
