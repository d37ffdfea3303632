// Command hello prints its first argument, for gobuild's tests.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Println("hello", os.Args[1]) }
