package gen

// Memo remembers, between runs, what checking a constructor found: a check
// that passed, by the key of everything it read (a CheckInput). A nil
// Memo remembers nothing.
type Memo interface {
	// Key is the key of in, "" when nothing is to be remembered.
	Key(in CheckInput) string
	// Get returns what the check under key found, if it is remembered.
	Get(key string) (Checked, bool)
	// Put remembers a check that passed.
	Put(key string, c Checked)
}

// noMemo is the Memo of a nil Memo: it remembers nothing.
type noMemo struct{}

func (noMemo) Key(CheckInput) string      { return "" }
func (noMemo) Get(string) (Checked, bool) { return Checked{}, false }
func (noMemo) Put(string, Checked)        {}

// CheckInput is what checking one constructor against the contract
// reads, and the key of what the check found is its hash (Memo.Key): a field
// added here is in the key, and what the check comes to read must be
// added here.
type CheckInput struct {
	// RegistryExport, ContractExport and PackageExport are the names of
	// the export files of the registry package, the contract's package
	// and the constructor's package in the go command's build cache: each
	// the hash of the file's content, wherever the cache lies.
	RegistryExport, ContractExport, PackageExport string
	// Factory, Roles and Registry are the contract as the manifest names
	// it and as its markers declare it: markers are comments, which export
	// data leaves out.
	Factory  string
	Roles    []Role
	Registry string
	// ImportPath and Constructor name the constructor, and EntryRoles are
	// the roles the entry serves (nil for every role).
	ImportPath, Constructor string
	EntryRoles              []string
}

// Checked is what a passing check found that the registry needs.
type Checked struct {
	Adapt    bool   `json:"adapt,omitempty"`
	DeclFile string `json:"decl_file"`
	DeclLine int    `json:"decl_line"`
}
