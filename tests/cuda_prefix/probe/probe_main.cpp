int probe_nvrtc();
int main() { return probe_nvrtc(); }
