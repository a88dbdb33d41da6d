// Package commitjson reads and writes the JSON of a run commit (request and
// response) without reflection, byte for byte as encoding/json would; anything
// unusual is left to encoding/json by reporting ok == false.
package commitjson
