// Command broken does not compile, for gobuild's tests.
package main

func main() { undefinedName() }
